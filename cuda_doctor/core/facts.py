"""The fact model: a flat mapping of dotted names to plain JSON values.

Names look like ``driver.version``, ``gpu[0].compute_capability`` or ``torch.cuda_build``.
A fact is either *known* (its value may legitimately be ``None``: a CPU-only torch has
``torch.cuda_build = None``) or *unknown*, in which case the reason it could not be
gathered is kept instead ("libnvidia-ml.so.1 not found").  Facts are the only thing
probes produce and the only thing rules read, so a saved facts file can be re-judged
anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cuda_doctor.core.families import about

#: JSON-compatible values a fact may hold.
FactValue = Any


@dataclass(slots=True)
class Facts:
    """Known facts (``values``) and facts that could not be gathered (``unknown``: name → reason)."""

    values: dict[str, FactValue] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    # the indices of each indexed family, redone only when names were added (names are never
    # removed, only values replaced): rules and derivers ask for them dozens of times per run
    _family_cache: dict[str, list[int]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _family_size: int = field(default=-1, init=False, repr=False, compare=False)
    _family_source: dict[str, FactValue] | None = field(default=None, init=False, repr=False, compare=False)

    # -- writing ---------------------------------------------------------------------------
    def set(self, name: str, value: FactValue) -> None:
        self.values[name] = value
        self.unknown.pop(name, None)

    def mark_unknown(self, name: str, reason: str) -> None:
        """Record that ``name`` could not be gathered; a known value always wins."""
        if name not in self.values:
            self.unknown[name] = reason

    def mark_all_unknown(self, names: Iterable[str], reason: str) -> None:
        for name in names:
            self.mark_unknown(name, reason)

    def merge(self, other: Facts) -> None:
        for name, value in other.values.items():
            self.set(name, value)
        for name, reason in other.unknown.items():
            self.mark_unknown(name, reason)

    # -- reading ---------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self.values

    def get(self, name: str, default: FactValue = None) -> FactValue:
        return self.values.get(name, default)

    def has(self, name: str) -> bool:
        return name in self.values

    def reason(self, name: str) -> str | None:
        """Why ``name`` is unknown, looking at the fact and then at its parents (``gpu[0]``, ``gpu``)."""
        if name in self.unknown:
            return self.unknown[name]
        parts = name.split(".")
        while len(parts) > 1:
            parts.pop()
            parent = ".".join(parts)
            if parent in self.unknown:
                return self.unknown[parent]
            bare = _strip_index(parent)
            if bare != parent and bare in self.unknown:
                return self.unknown[bare]
        return None

    def unknown_reason(self, name: str) -> str:
        """Why ``name`` is unknown, always as words for a person: the recorded reason, or what
        the fact is about and that nothing was gathered (a saved file may lack whole families)."""
        return self.reason(name) or f"nothing was gathered about {about(name)}"

    def indices(self, family: str) -> list[int]:
        """The indices that exist for an indexed family, e.g. ``gpu`` → [0, 1]."""
        return list(self._families().get(family, ()))

    def _families(self) -> dict[str, list[int]]:
        if self._family_source is not self.values or self._family_size != len(self.values):
            found: dict[str, set[int]] = {}
            for name in self.values:
                family, bracket, rest = name.partition("[")
                if bracket and family.isidentifier():
                    index, close, tail = rest.partition("]")
                    if close and index.isdigit() and tail.startswith("."):
                        found.setdefault(family, set()).add(int(index))
            self._family_cache = {family: sorted(numbers) for family, numbers in found.items()}
            self._family_source, self._family_size = self.values, len(self.values)
        return self._family_cache

    def with_prefix(self, prefix: str) -> dict[str, FactValue]:
        """All known facts below ``prefix.`` with the prefix removed."""
        start = prefix + "."
        return {k[len(start) :]: v for k, v in self.values.items() if k.startswith(start)}

    def copy(self) -> Facts:
        return Facts(dict(self.values), dict(self.unknown))

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"values": dict(sorted(self.values.items())), "unknown": dict(sorted(self.unknown.items()))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Facts:
        values = data.get("values", {})
        unknown = data.get("unknown", {})
        if not isinstance(values, dict) or not isinstance(unknown, dict):
            raise ValueError("facts must have 'values' and 'unknown' objects")
        return cls(dict(values), {str(k): str(v) for k, v in unknown.items()})


def reported(payload: Mapping[str, Any], prefixes: tuple[str, ...], expected: Iterable[str], who: str) -> Facts | None:
    """The facts under ``prefixes`` of a child's report (``{"values": …, "unknown": …}``), each of
    ``expected`` it left out unknown ("``who`` did not report it"); None when it is no such report."""
    values, unknown = payload.get("values"), payload.get("unknown")
    if not isinstance(values, dict) or not isinstance(unknown, dict):
        return None
    facts = Facts()
    for name, value in values.items():
        if isinstance(name, str) and name.startswith(prefixes):
            facts.set(name, value)
    for name, reason in unknown.items():
        if isinstance(name, str) and name.startswith(prefixes):
            facts.mark_unknown(name, str(reason))
    for name in expected:
        if name not in facts.values and name not in facts.unknown:
            facts.mark_unknown(name, f"{who} did not report it")
    return facts


def need(facts: Facts, out: str, *names: str) -> bool:
    """True when every input is known; otherwise mark ``out`` unknown with the first reason."""
    for name in names:
        if not facts.has(name):
            facts.mark_unknown(out, facts.unknown_reason(name))
            return False
    return True


def _strip_index(name: str) -> str:
    return re.sub(r"\[\d+\]", "", name)


def indexed(family: str, index: int, name: str) -> str:
    """``indexed("gpu", 0, "name")`` → ``gpu[0].name``."""
    return f"{family}[{index}].{name}"

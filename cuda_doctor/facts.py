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
from typing import Any

#: JSON-compatible values a fact may hold.
FactValue = Any


class Facts:
    """Known facts (``values``) and facts that could not be gathered (``unknown``: name → reason)."""

    # A plain class, not a dataclass: making a dataclass costs about 1 ms, and every start of
    # cuda-doctor imports this module (docs/architecture.md, start-up).
    __slots__ = ("_family_cache", "_family_size", "_family_source", "unknown", "values")

    def __init__(self, values: dict[str, FactValue] | None = None, unknown: dict[str, str] | None = None) -> None:
        self.values: dict[str, FactValue] = {} if values is None else values
        self.unknown: dict[str, str] = {} if unknown is None else unknown
        self._family_cache: dict[str, list[int]] = {}
        self._family_source: dict[str, FactValue] | None = None
        self._family_size = -1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Facts):
            return NotImplemented
        return (self.values, self.unknown) == (other.values, other.unknown)

    __hash__ = None  # type: ignore[assignment]  # mutable: equal facts may not stay equal

    def __repr__(self) -> str:
        return f"Facts(values={self.values!r}, unknown={self.unknown!r})"

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
        # Rules and derivers ask for indices dozens of times per run: one pass over the names,
        # redone only when names were added (names are never removed, only values replaced).
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


#: What each family of facts is about, in words (``about``): a message never shows a fact's name.
_ABOUT = {
    "driver": "the NVIDIA driver",
    "gpu": "the GPUs",
    "torch": "torch",
    "tensorflow": "TensorFlow",
    "framework": "the framework",
    "container": "the container",
    "system": "this system",
    "shm": "the shared memory",
    "env": "the environment variables",
    "cvd": "CUDA_VISIBLE_DEVICES",
    "smoke": "the GPU smoke run",
    "nccl": "NCCL and the links between the GPUs",
    "nvlink": "NVLink",
    "docker": "Docker",
    "image": "the Docker images",
    "toolkit": "the CUDA toolkit",
    "nvcc": "the CUDA toolkit",
    "probe": "the probes",
}


def about(name: str) -> str:
    """``driver.status`` → "the NVIDIA driver", ``derived.gpu[0].sm`` → "the GPUs"."""
    family = re.split(r"[.\[]", name.removeprefix("derived."), maxsplit=1)[0]
    # derived.driver_cuda_support is about the driver, derived.shm_mib about shared memory
    return _ABOUT.get(family) or _ABOUT.get(family.split("_")[0], "what this check needs")


def _strip_index(name: str) -> str:
    return re.sub(r"\[\d+\]", "", name)


def indexed(family: str, index: int, name: str) -> str:
    """``indexed("gpu", 0, "name")`` → ``gpu[0].name``."""
    return f"{family}[{index}].{name}"

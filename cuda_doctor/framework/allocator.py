"""The correction of allocator settings that torch rejected: the key its error names, the known
key nearest to it (``rules/data/torch_allocator.toml``), and the ``export`` line with it."""

from __future__ import annotations

import difflib
import re
import shlex

from cuda_doctor.core.facts import Facts

#: torch's words for a key it does not know: 2.9 and later, then the releases before.
_BAD_KEY = (
    re.compile(r"Unrecognized key '([^']*)'"),
    re.compile(r"Unrecognized CachingAllocator option: (\S+)"),
)
FIX_FACTS = ("torch.alloc_conf_bad_key", "torch.alloc_conf_suggestion", "torch.alloc_conf_fix")


def bad_key(error: str) -> str | None:
    for pattern in _BAD_KEY:
        match = pattern.search(error)
        if match:
            return match.group(1)
    return None


def split_settings(value: str) -> list[str]:
    """``"a:1,b:[2:3,>:4]"`` → ``["a:1", "b:[2:3,>:4]"]``: the comma inside brackets belongs to a list."""
    items: list[str] = []
    depth = 0
    current = ""
    for char in value:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth <= 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def nearest_key(key: str, known: list[str]) -> str | None:
    found = difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.75)
    return found[0] if found else None


def corrected(value: str, key: str, known: list[str]) -> tuple[str | None, str]:
    """The key that replaces ``key`` (None: it is dropped) and the settings with it."""
    suggestion = nearest_key(key, known)
    kept = []
    for item in split_settings(value):
        name, colon, rest = item.partition(":")
        if name.strip() != key:
            kept.append(item)
        elif suggestion is not None:
            kept.append(f"{suggestion}{colon}{rest}")
    return suggestion, ",".join(kept)


def export_line(variable: str, value: str) -> str:
    return f"export {variable}={shlex.quote(value)}" if value else f"unset {variable}"


def add_fix(facts: Facts, known: list[str]) -> None:
    """``torch.alloc_conf_bad_key``, ``…_suggestion`` and ``…_fix`` from what torch rejected."""
    error = facts.get("torch.alloc_conf_error")
    if not facts.has("torch.alloc_conf_error") or not error:
        reason = facts.unknown_reason("torch.alloc_conf_error") if not facts.has("torch.alloc_conf_error") else None
        for name in FIX_FACTS:
            facts.mark_unknown(name, reason or "torch accepts the allocator settings")
        return
    variable = facts.get("torch.alloc_conf_variable")
    settings = facts.get("torch.alloc_conf")
    value = settings.get(variable) if isinstance(settings, dict) and isinstance(variable, str) else None
    key = bad_key(str(error))
    if key is None or not isinstance(value, str) or not isinstance(variable, str):
        for name in FIX_FACTS:
            facts.mark_unknown(name, "torch's error names no unknown key to correct")
        return
    suggestion, fixed = corrected(value, key, known)
    facts.set("torch.alloc_conf_bad_key", key)
    facts.set("torch.alloc_conf_suggestion", suggestion)
    facts.set("torch.alloc_conf_fix", export_line(variable, fixed))

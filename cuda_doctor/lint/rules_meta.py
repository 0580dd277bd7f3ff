"""The static rules (``rules/CDL*.toml``, ``kind = "lint"``) as the lint engine uses them, and
message rendering.  The files are read and checked by ``cuda_doctor.rules``, like every rule."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cuda_doctor import rules as all_rules

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class LintRule:
    id: str
    title: str
    category: str
    severity: str
    rationale: str
    message: str
    fix: str
    links: tuple[str, ...]
    detector: str

    def render(self, template: str, captures: Mapping[str, str]) -> str:
        """Fill ``{name}`` placeholders from the detector's captures; a missing one renders ``?``."""
        return _PLACEHOLDER.sub(lambda m: captures.get(m.group(1), "?"), template)


@functools.lru_cache(maxsize=4)
def load_rules(directory: Path | None = None) -> dict[str, LintRule]:
    """All lint rules, by id (sorted): the built-in ones, or those of ``directory``."""
    found = all_rules.load_rules() if directory is None else all_rules.load_rules([directory], builtin=False)
    return {
        rule.id: LintRule(
            id=rule.id,
            title=rule.title,
            category=rule.category,
            severity=rule.severity.value,
            rationale=rule.rationale,
            message=rule.message,
            fix=rule.fix or "",
            links=rule.links,
            detector=rule.detector or "",
        )
        for rule in sorted(found, key=lambda rule: rule.id)
        if rule.kind == "lint"
    }

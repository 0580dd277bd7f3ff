"""Metadata of the static rules (``rules/CDL*.toml``, ``kind = "lint"``) and message rendering."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cuda_doctor.paths import rules_dir
from cuda_doctor.tomlcompat import tomllib

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
REQUIRED = ("id", "title", "category", "severity", "rationale", "message", "detector")


class RuleFileError(Exception):
    """A CDL rule file that cannot be used; the message names the file and the field."""


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


def _load(path: Path) -> LintRule:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RuleFileError(f"{path}: {exc}") from None
    missing = [key for key in REQUIRED if not isinstance(data.get(key), str)]
    if missing:
        raise RuleFileError(f"{path}: missing or non-string field '{missing[0]}'")
    if data.get("kind") != "lint":
        raise RuleFileError(f"{path}: field 'kind' must be \"lint\"")
    if data["severity"] not in ("error", "warning", "info"):
        raise RuleFileError(f"{path}: field 'severity' must be error, warning or info")
    if data["id"] != path.stem:
        raise RuleFileError(f"{path}: id {data['id']!r} does not match the file name")
    links = data.get("links", [])
    if not isinstance(links, list) or not all(isinstance(x, str) for x in links):
        raise RuleFileError(f"{path}: field 'links' must be a list of URLs")
    return LintRule(
        id=data["id"],
        title=data["title"],
        category=data["category"],
        severity=data["severity"],
        rationale=data["rationale"].strip(),
        message=data["message"],
        fix=str(data.get("fix", "")),
        links=tuple(links),
        detector=data["detector"],
    )


@functools.lru_cache(maxsize=4)
def load_rules(directory: Path | None = None) -> dict[str, LintRule]:
    """All ``CDL*.toml`` rules, by id (sorted)."""
    base = directory if directory is not None else rules_dir()
    rules = [_load(path) for path in sorted(base.glob("CDL*.toml"))]
    return {rule.id: rule for rule in rules}

"""What a static check found: one frozen record per finding, plus per-file summaries."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.core.results import Severity


@dataclass(frozen=True)
class Hit:
    """A detector's raw catch: where, which rule, and the values for the message template."""

    rule_id: str
    line: int
    column: int = 1
    captures: tuple[tuple[str, str], ...] = ()
    severity: Severity | None = None  # overrides the rule's default for this one hit

    @classmethod
    def make(
        cls, rule_id: str, line: int, column: int = 1, *, severity: Severity | None = None, **captures: object
    ) -> Hit:
        pairs = tuple(sorted((k, str(v)) for k, v in captures.items()))
        return cls(rule_id, max(1, line), max(1, column), pairs, severity)

    def capture_dict(self) -> dict[str, str]:
        return dict(self.captures)


def display_path(path: Path) -> str:
    """A path as findings show it: relative to the working directory when below it (links are not
    followed: they may loop)."""
    if not path.is_absolute():
        return path.as_posix()
    relative = os.path.relpath(path, Path.cwd())
    return path.as_posix() if relative.startswith("..") else Path(relative).as_posix()


def position(node: object) -> tuple[int, int]:
    """An AST node's 1-based (line, column)."""
    return getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1


@dataclass(frozen=True)
class Finding:
    """One rendered finding: location (1-based line and column), rule, severity, message, fix."""

    path: str
    line: int
    column: int
    rule_id: str
    severity: Severity
    message: str
    fix: str | None = None
    title: str = ""
    category: str = ""

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.rule_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": None,  # no check reports a range (the field is kept for the schema)
            "end_column": None,
            "rule": self.rule_id,
            "title": self.title,
            "category": self.category,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix,
        }

"""The one place lint output is written: the chosen format, to stdout or a file."""

from __future__ import annotations

import sys
from pathlib import Path

from cuda_doctor.lint.engine import LintReport
from cuda_doctor.report import lint_github, lint_json, lint_sarif, lint_text

FORMATS = ("text", "json", "sarif", "github")


def render(report: LintReport, fmt: str, color: bool = False) -> str:
    if fmt == "json":
        return lint_json.render(report)
    if fmt == "sarif":
        return lint_sarif.render(report)
    if fmt == "github":
        return lint_github.render(report)
    return lint_text.render(report, color=color)


def write(report: LintReport, fmt: str, output: Path | None = None) -> None:
    if output is not None:
        output.write_text(render(report, fmt), encoding="utf-8")
        return
    sys.stdout.write(render(report, fmt, color=fmt == "text" and sys.stdout.isatty()))
    sys.stdout.flush()

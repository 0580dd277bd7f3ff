"""Lint reports: one renderer per format, each returning the whole report as a string."""

from __future__ import annotations

from cuda_doctor.lint.engine import LintReport
from cuda_doctor.report.lint import github, json, sarif, text

FORMATS = ("text", "json", "sarif", "github")


def render(report: LintReport, fmt: str, color: bool = False) -> str:
    """``color``: the text format is coloured for a terminal (the others have no colour)."""
    if fmt == "text":
        return text.render(report, color)
    return {"json": json, "sarif": sarif, "github": github}[fmt].render(report)

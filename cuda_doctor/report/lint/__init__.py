"""Lint reports: one renderer per format, each returning the whole report as a string."""

from __future__ import annotations

from collections.abc import Callable

from cuda_doctor.lint.engine import LintReport
from cuda_doctor.report.lint import github, json, sarif, text

#: Format name → renderer (the report, and whether to colour it for a terminal).
RENDERERS: dict[str, Callable[[LintReport, bool], str]] = {
    "text": text.render,
    "json": lambda report, _color: json.render(report),
    "sarif": lambda report, _color: sarif.render(report),
    "github": lambda report, _color: github.render(report),
}
FORMATS = tuple(RENDERERS)


def render(report: LintReport, fmt: str, color: bool = False) -> str:
    return RENDERERS[fmt](report, color)

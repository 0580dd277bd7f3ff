"""Reporters: the only code that turns results into output.  Each format returns a string."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_doctor.pipeline import Report

FORMATS = ("text", "json", "markdown")


def render(report: Report, fmt: str, verbose: bool = False, terminal: bool = False, fail_on: str = "error") -> str:
    """Render a check report in ``fmt`` (one of FORMATS).

    ``terminal``: the output goes to a terminal, so text gets colour and JSON is indented
    (piped JSON is compact, as ``gh`` and ``pip-audit`` print it, and quicker to write).
    """
    from cuda_doctor.results import Severity

    severity = Severity(fail_on)
    if fmt == "json":
        from cuda_doctor.report.check.json import render_json

        return render_json(report, severity, indent=2 if terminal else None)
    if fmt == "markdown":
        from cuda_doctor.report.check.markdown import render_markdown

        return render_markdown(report, verbose, severity)
    from cuda_doctor.report.check.text import render_text

    return render_text(report, verbose=verbose, color=terminal, fail_on=severity)

"""GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` per finding."""

from __future__ import annotations

from cuda_doctor.lint.engine import LintReport
from cuda_doctor.report import printable

COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    """Escaped as the runner reads it; any other control character (ESC, BEL) shown, not sent."""
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: LintReport) -> str:
    lines = []
    for f in report.findings:
        props = [f"file={_prop(f.path)}", f"line={f.line}", f"col={f.column}"]
        props.append(f"title={_prop(f'{f.rule_id} {f.title}')}")
        message = f.message if not f.fix else f"{f.message}\nFix: {f.fix}"
        lines.append(f"::{COMMAND[f.severity.value]} {','.join(props)}::{_data(message)}")
    return "\n".join(lines) + ("\n" if lines else "")

"""Plain-text lint output: one line per finding (path:line:col), the fix under it, a summary."""

from __future__ import annotations

from cuda_doctor.lint.engine import LintReport
from cuda_doctor.report import count, printable


def render(report: LintReport, color: bool = False) -> str:
    lines: list[str] = []
    for f in report.findings:
        level = f.severity.value
        if color:
            import click

            tint = {"error": "red", "warning": "yellow", "info": "blue"}.get(level)
            level = click.style(level, fg=tint, bold=True)
        # paths and captured source text come from the linted files: never act on their escapes
        lines.append(f"{printable(f.path)}:{f.line}:{f.column}: {f.rule_id} {level}: {printable(f.message)}")
        if f.fix:
            first, *rest = f.fix.splitlines() or [""]
            lines.append(f"    fix: {printable(first)}")
            lines.extend(f"         {printable(line)}" for line in rest)
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    files = count(report.files, "file")
    if report.findings:
        parts = ", ".join(count(n, s, "info" if s == "info" else None) for s, n in counts.items() if n)
        lines.append(f"{count(len(report.findings), 'finding')} ({parts}) in {files}")
    else:
        lines.append(f"No findings in {files}")
    return "\n".join(lines) + "\n"

"""Plain-text lint output: one line per finding (path:line:col), the fix under it, a summary."""

from __future__ import annotations

from cuda_doctor.lint.engine import LintReport
from cuda_doctor.report import printable


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
    total = len(report.findings)
    noun = "file" if report.files == 1 else "files"
    if total:
        parts = ", ".join(f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in counts.items() if n)
        lines.append(f"{total} finding{'s' if total != 1 else ''} ({parts}) in {report.files} {noun}")
    else:
        lines.append(f"No findings in {report.files} {noun}")
    return "\n".join(lines) + "\n"

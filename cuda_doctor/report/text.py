"""The terminal checklist (rich): grouped by category, ✓ ✗ ! ? marks, the fix under each finding."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from cuda_doctor.report.common import (
    CATEGORY_TITLES,
    MARKS,
    STYLES,
    grouped,
    subject_prefix,
    summary_line,
    visible,
    worst,
)
from cuda_doctor.results import Result, Severity, Status

if TYPE_CHECKING:
    from cuda_doctor.pipeline import Report


def render_text(report: Report, *, verbose: bool, color: bool, fail_on: Severity, width: int = 100) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=not color
    )
    headline = _headline(report)
    if headline:
        console.print(Text(headline, style="bold"))
        console.print()
    for category, results in grouped(report.results):
        mark = worst(results)
        shown = [r for r in results if visible(r, verbose)]
        title = CATEGORY_TITLES.get(category, category.capitalize())
        passed = sum(r.status is Status.PASS for r in results)
        tail = "" if shown else f"  ({passed} checks passed)" if passed else "  (not applicable)"
        console.print(Text.assemble((f"[{MARKS[mark]}] ", STYLES[mark]), (title, "bold"), (tail, "dim")))
        for result in shown:
            _print_result(console, result, verbose)
    for problem in report.problems:
        console.print(Text(f"internal: {problem}", style="red"))
    console.print()
    counts = report.counts()
    code = report.exit_code(fail_on)
    console.print(Text(summary_line(counts, code, fail_on), style="bold red" if code else "bold green"))
    return buffer.getvalue()


def _headline(report: Report) -> str:
    facts = report.facts
    bits = []
    if facts.has("driver.version"):
        bits.append(f"driver {facts.get('driver.version')} (CUDA {facts.get('driver.cuda_version') or '?'})")
    names = [facts.get(f"gpu[{i}].name") for i in facts.indices("gpu")]
    if names:
        bits.append(f"{len(names)}× {names[0]}" if len(set(names)) == 1 else ", ".join(map(str, names)))
    if facts.get("torch.installed"):
        build = facts.get("torch.cuda_build")
        bits.append(f"torch {facts.get('torch.version')} ({'CUDA ' + str(build) if build else 'CPU-only'})")
    return " · ".join(bits)


def _print_result(console: Console, result: Result, verbose: bool) -> None:
    mark = Text(f"    {MARKS[result.status]} ", style=STYLES[result.status])
    line = Text.assemble(mark, (subject_prefix(result), "bold"), escape(result.message))
    console.print(line)
    if result.fix and result.status not in (Status.PASS, Status.SKIPPED):
        console.print(Text(f"        fix: {result.fix}", style="italic"))
    for command in result.commands:
        console.print(Text(f"          $ {command}", style="bold"))
    if result.status in (Status.FAIL, Status.WARN, Status.ERROR) or verbose:
        rule = f"        ({result.rule_id}: {result.title}"
        rule += f"; see {result.links[0]})" if result.links else ")"
        console.print(Text(rule, style="dim"))
    if verbose and result.evidence:
        for name, value in result.evidence.items():
            console.print(Text(f"          {name} = {value}", style="dim"))

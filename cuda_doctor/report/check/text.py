"""The terminal checklist: grouped by category, ✓ ✗ ! ? marks, the fix under each finding.
Built as (text, style) segments: coloured through rich on a terminal, plain text elsewhere."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report import count, origin_note, printable
from cuda_doctor.report.check.common import CATEGORY_TITLES, MARKS, STYLES, grouped, summary_line, visible, worst

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report
    from cuda_doctor.core.facts import Facts

Segment = tuple[str, str]  # (text, rich style)
Line = list[Segment]


def render(
    report: Report,
    *,
    verbose: bool = False,
    terminal: bool = False,
    fail_on: Severity = Severity.ERROR,
    width: int = 100,
) -> str:
    # every segment, ours or from outside (a variable's value), is shown with its controls escaped
    lines = [
        [(printable(text), style) for text, style in line]
        for line in checklist_lines(report, verbose=verbose, fail_on=fail_on)
    ]
    if not terminal:
        return "".join("".join(text for text, _ in line) + "\n" for line in lines)
    from rich.console import Console
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=width, highlight=False)
    for line in lines:
        console.print(Text.assemble(*line))
    return buffer.getvalue()


def checklist_lines(report: Report, *, verbose: bool, fail_on: Severity) -> list[Line]:
    lines: list[Line] = []
    headline = _headline(report)
    if headline:
        lines += [[(headline, "bold")], []]
    for category, results in grouped(report.results):
        mark = worst(results)
        shown = [r for r in results if visible(r, verbose)]
        title = CATEGORY_TITLES.get(category, category.capitalize())
        passed = sum(r.status is Status.PASS for r in results)
        tail = "" if shown else f"  ({count(passed, 'check')} passed)" if passed else f"  ({_why_skipped(results)})"
        lines.append([(f"[{MARKS[mark]}] ", STYLES[mark]), (title, "bold"), (tail, "dim")])
        for result, times in _collapsed(shown, verbose):
            lines.extend(_result_lines(result, verbose, times))
    lines += [[(f"internal: {problem}", "red")] for problem in report.problems]
    code = report.exit_code(fail_on)
    lines += [[], [(summary_line(report, fail_on), "bold red" if code else "bold green")]]
    return lines


def _why_skipped(results: list[Result]) -> str:
    """Why a section whose checks were all skipped was: its reasons, unless there are many."""
    reasons = list(dict.fromkeys(r.message for r in results if r.status is Status.SKIPPED))
    joined = "; ".join(reasons)
    return joined if len(reasons) <= 2 and len(joined) <= 120 else "not applicable here; -v says why for each check"


def _headline(report: Report) -> str:
    facts = report.facts
    bits = []
    if facts.has("driver.version"):
        bits.append(f"driver {facts.get('driver.version')} (CUDA {facts.get('driver.cuda_version') or 'unknown'})")
    names = [facts.get(f"gpu[{i}].name") for i in facts.indices("gpu")]
    if names:
        bits.append(f"{len(names)}× {names[0]}" if len(set(names)) == 1 else ", ".join(map(str, names)))
    bits += [framework for framework in (_torch(facts), _jax(facts)) if framework]
    return " · ".join(bits)


def _torch(facts: Facts) -> str:
    """What the headline says of torch: its build, that its import failed (and how), or nothing."""
    if facts.get("torch.installed") is False:
        return f"no torch in {facts.get('framework.python')}"
    if not facts.get("torch.installed"):
        return ""
    if facts.get("torch.import_error"):  # the last line of the import's traceback
        return f"torch: import failed ({facts.get('torch.import_error')})"
    if not facts.has("torch.version"):
        return f"torch: version unknown ({facts.unknown_reason('torch.version')})"
    if not facts.has("torch.cuda_build"):
        return f"torch {facts.get('torch.version')}"
    build = facts.get("torch.cuda_build")
    return f"torch {facts.get('torch.version')} ({'CUDA ' + str(build) if build else 'CPU-only'})"


def _jax(facts: Facts) -> str:
    """What the headline says of JAX: its version, CUDA plugin and GPUs, or that its import failed."""
    if not facts.get("jax.installed"):
        return ""
    if facts.get("jax.import_error"):
        return f"jax: import failed ({str(facts.get('jax.import_error')).splitlines()[0]})"
    head = f"jax {facts.get('jax.version')}"
    major = facts.get("jax.cuda_plugin_major")
    if facts.has("jax.cuda_plugin_major") and not major:
        return f"{head} (CPU-only)"
    gpus = facts.get("jax.gpu_count")
    seen = f", {count(gpus, 'GPU')}" if isinstance(gpus, int) else ""
    return f"{head} (CUDA {major}{seen})" if major else head


def _collapsed(shown: list[Result], verbose: bool) -> list[tuple[Result, int]]:
    """The section's results; checks that could not run for the same reason are said once, counted."""
    if verbose:
        return [(result, 1) for result in shown]
    rows: dict[object, list[Result]] = {}  # in the order each row is first seen
    for result in shown:
        same = (_subject(result), result.message, result.fix, tuple(result.commands))
        rows.setdefault(same if result.status is Status.UNKNOWN else id(result), []).append(result)
    return [(row[0], len(row)) for row in rows.values()]


def _subject(result: Result) -> str:
    return f"[{result.subject}] " if result.subject else ""


def _result_lines(result: Result, verbose: bool, times: int) -> list[Line]:
    mark = (f"    {MARKS[result.status]} ", STYLES[result.status])
    times_seen = (f"  ({times} checks)" if times > 1 else "", "dim")
    lines: list[Line] = [[mark, (_subject(result), "bold"), (result.message, ""), times_seen]]
    if result.origin:
        lines.append([(f"        ({origin_note(result.origin)})", "yellow")])
    if result.fix and result.status not in (Status.PASS, Status.SKIPPED):
        lines.append([(f"        fix: {result.fix}", "italic")])
    lines += [[(f"          $ {command}", "bold")] for command in result.commands]
    if result.status in (Status.FAIL, Status.WARN, Status.ERROR) or verbose:
        rule = f"        ({result.rule_id}: {result.title}"
        rule += f"; see {result.links[0]})" if result.links else ")"
        lines.append([(rule, "dim")])
    if verbose:  # evidence values are shown as JSON (null, true), as in the JSON report
        for name, value in result.evidence.items():
            lines.append([(f"          {name} = {json.dumps(value, default=str, ensure_ascii=False)}", "dim")])
    return lines

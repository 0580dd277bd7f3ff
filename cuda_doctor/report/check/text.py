"""The terminal checklist: grouped by category, ✓ ✗ ! ? marks, the fix under each finding.
Built as (text, style) segments: coloured through rich on a terminal, plain text elsewhere."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report import count, origin_note, printable
from cuda_doctor.report.check.common import (
    CATEGORY_TITLES,
    MARKS,
    STYLES,
    Causes,
    consequence_line,
    grouped,
    rule_ids,
    summary_line,
    verb,
    visible,
    worst,
)

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
    interpreter = _interpreter_note(report.facts)
    memory = free_memory(report.facts)
    if headline or interpreter or memory:
        heading = ((headline, "bold"), (memory, ""), (interpreter, ""))
        lines += [[(text, style)] for text, style in heading if text] + [[]]
    causes = Causes(report.results)
    for category, all_results in grouped(report.results):
        # a failure another one explains is shown with its cause, not here
        results = [r for r in all_results if not causes.is_consequence(r)]
        mark = worst(all_results)  # a section whose check failed because of another still failed
        shown = [r for r in results if visible(r, verbose)]
        here = {r.rule_id for r in shown}  # a cause in this section already says what it explains
        moved = _moved_note([r for r in all_results if causes.is_consequence(r) and r.because not in here])
        title = CATEGORY_TITLES.get(category, category.capitalize())
        passed = sum(r.status is Status.PASS for r in results)
        said = [f"{count(passed, 'check')} passed" if passed else _why_skipped(results)] if results else []
        tail = "" if shown else f"  ({'; '.join(said + ([moved] if moved else []))})"
        lines.append([(f"[{MARKS[mark]}] ", STYLES[mark]), (title, "bold"), (tail, "dim")])
        for result, times in _collapsed(shown, verbose):
            lines.extend(_result_lines(result, verbose, times))
            lines.extend(_consequence_lines(causes.of(result), verbose))
        if moved and shown:
            lines.append([(f"    ({moved})", "dim")])
    lines += [[(f"internal: {problem}", "red")] for problem in report.problems]
    code = report.exit_code(fail_on)
    lines += [[], [(summary_line(report, fail_on), "bold red" if code else "bold green")]]
    return lines


def _moved_note(consequences: list[Result]) -> str:
    """ "CD202, CD245 failed because of CD702": what a section does not show, and where it is."""
    by_cause: dict[str, list[Result]] = {}
    for result in consequences:
        by_cause.setdefault(str(result.because), []).append(result)
    return "; ".join(f"{rule_ids(group)} {verb(group)} because of {cause}" for cause, group in by_cause.items())


def _consequence_lines(consequences: list[Result], verbose: bool) -> list[Line]:
    """Under a cause: how many checks failed because of it and which; with -v each of them, in full."""
    if not consequences:
        return []
    lines: list[Line] = [[(f"        {consequence_line(consequences)}", "bold" if verbose else "")]]
    if verbose:
        for result in consequences:
            lines += [[("        ", ""), *line] for line in _result_lines(result, verbose, 1)]
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


#: GPUs named one by one in the free-memory line; past that, the one with the least free.
_FREE_MEMORY_GPUS = 8


def free_memory(facts: Facts) -> str:
    """Each GPU's free memory (total less used, as CD604 judges it), or "" when it was not read."""
    rows = []
    for i in facts.indices("gpu"):
        free, total = facts.get(f"derived.gpu[{i}].memory_free_mib"), facts.get(f"gpu[{i}].memory_total_mib")
        if isinstance(free, int) and isinstance(total, int) and total > 0:
            rows.append((i, free, total))
    if not rows:
        return ""
    if len(rows) == 1:
        return f"free GPU memory: {rows[0][1]:,} of {rows[0][2]:,} MiB"
    if len(rows) > _FREE_MEMORY_GPUS:
        i, free, total = min(rows, key=lambda row: row[1] / row[2])
        return f"free GPU memory: least on GPU {i}, {free:,} of {total:,} MiB ({len(rows)} GPUs read)"
    if len({total for _, _, total in rows}) == 1:
        each = ", ".join(f"GPU {i} {free:,}" for i, free, _ in rows)
        return f"free GPU memory (MiB of {rows[0][2]:,}): {each}"
    return "free GPU memory (MiB): " + ", ".join(f"GPU {i} {free:,} of {total:,}" for i, free, total in rows)


def _interpreter_note(facts: Facts) -> str:
    """Which interpreter's framework was checked, when cuda-doctor chose another than its own
    (or looked for one and found none): "checked /opt/conda/envs/train/bin/python: …"."""
    if facts.get("framework.interpreter_how") not in ("found", "fallback"):
        return ""
    return f"checked {facts.get('framework.interpreter')}: {facts.get('framework.interpreter_why')}"


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

"""One line for schedulers (a Slurm drain reason, a node-problem-detector message): printable
ASCII of at most ``LIMIT`` characters, starting with its verdict word: ``OK`` (exit 0), ``FAIL``
(1: the worst finding, then the other ids) or ``UNKNOWN`` (2: no verdict, neither drain nor resume)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cuda_doctor.core.results import EXIT_NO_VERDICT, Result, Severity, Status, is_core, no_verdict
from cuda_doctor.report import count, printable
from cuda_doctor.report.check.common import ORDER

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report

#: Longest line, in characters (all ASCII, so also in bytes).
LIMIT = 200
_MAX_IDS = 6
_ASCII = str.maketrans(
    {"…": "...", "—": "-", "–": "-", "×": "x", "→": "->", "‘": "'", "’": "'", "“": '"', "”": '"', "≥": ">=", "≤": "<="}
)


@dataclass(frozen=True)
class Verdict:
    word: str  # OK | FAIL | UNKNOWN
    exit_code: int
    line: str  # without the newline


def render(report: Report, *, verbose: bool = False, terminal: bool = False, fail_on: Severity = Severity.ERROR) -> str:
    return render_oneline(report, fail_on)


def render_oneline(report: Report, fail_on: Severity = Severity.ERROR, limit: int = LIMIT) -> str:
    return judge_oneline(report, fail_on, limit).line + "\n"


def judge_oneline(report: Report, fail_on: Severity = Severity.ERROR, limit: int = LIMIT) -> Verdict:
    results = report.results
    findings = _worst_first(r for r in results if r.rank() >= fail_on.rank)
    if findings:
        cause, rest = findings[0], findings[1:]
        explained = cause.because is None and all(r.because == cause.rule_id for r in rest)
        what = f"more because of {cause.rule_id}" if explained else "more"
        return Verdict("FAIL", 1, _fit(f"FAIL {_describe(cause)}", _more(rest, what), limit))
    unknown = _worst_first(r for r in results if r.status is Status.UNKNOWN)
    judged = [r for r in results if r.status in (Status.PASS, Status.INFO, Status.WARN)]
    why = no_verdict(results)  # the rule every format follows (results.no_verdict)
    if why is not None:
        first = next((r for r in unknown if is_core(r)), unknown[0] if unknown else None)
        rest = [r for r in unknown if r is not first]
        said = _describe(first) if first is not None else clean(why)
        trouble = _probe_trouble(report)
        head = f"UNKNOWN {said}{trouble if trouble.strip(' ()') not in said else ''}"
        return Verdict("UNKNOWN", EXIT_NO_VERDICT, _fit(head, _more(rest, "more could not check"), limit))
    return Verdict("OK", 0, _fit(_ok_head(report, judged, unknown), "", limit))


def clean(text: object) -> str:
    """``text`` as printable ASCII: typographic marks spelled out, anything else escaped, and a
    backslash doubled so that an escape in the line is never ambiguous."""
    return printable(str(text).translate(_ASCII).replace("\\", "\\\\"), ascii_only=True)


def _worst_first(results: Iterable[Result]) -> list[Result]:
    """Worst first; a failure that another one explains after every cause, so that the line names a cause."""
    return sorted(
        results, key=lambda r: (r.because is not None, -r.rank(), ORDER.index(r.status), r.rule_id, r.subject or "")
    )


def _describe(result: Result) -> str:
    subject = f"{result.subject}: " if result.subject else ""
    origin = f"(rule from {result.origin}) " if result.origin else ""
    return clean(f"{result.rule_id} {origin}{subject}{result.message}")


def _more(results: list[Result], what: str) -> str:
    return clean(f" (+{len(results)} {what}: {_id_list(results)})") if results else ""


def _probe_trouble(report: Report) -> str:
    """A probe that crashed or overran explains why its facts are unknown; say which."""
    facts = report.facts
    names = sorted(
        n.split(".")[1]
        for n, v in facts.values.items()
        if n.startswith("probe.") and n.endswith(".status") and v in ("timeout", "error")
    )
    reasons = [facts.unknown.get(name) or f"the {name} probe failed" for name in names]
    return clean(f" ({'; '.join(reasons)})") if reasons else ""


def _ok_head(report: Report, judged: list[Result], unknown: list[Result]) -> str:
    bits = [count(sum(r.status is Status.PASS for r in judged), "check") + " passed"]
    below = _worst_first(r for r in judged if r.status is Status.WARN)
    if below:
        bits.append(f"{count(len(below), 'warning')} ({_id_list(below)})")
    if unknown:
        bits.append(f"{len(unknown)} could not check ({_id_list(unknown)})")
    machine = _machine(report)
    return clean(f"OK {machine + ': ' if machine else ''}{', '.join(bits)}")


def _id_list(results: list[Result]) -> str:
    """The rule ids, each once, the first ``_MAX_IDS`` of them."""
    ids = list(dict.fromkeys(r.rule_id for r in results))
    return ", ".join(ids[:_MAX_IDS]) + (", ..." if len(ids) > _MAX_IDS else "")


def _machine(report: Report) -> str:
    facts = report.facts
    bits = []
    if facts.has("driver.version"):
        cuda = facts.get("driver.cuda_version")
        bits.append(f"driver {facts.get('driver.version')}" + (f" (CUDA {cuda})" if cuda else ""))
    names = [facts.get(f"gpu[{i}].name") for i in facts.indices("gpu")]
    if names:
        bits.append(f"{len(names)}x {names[0]}" if len(set(names)) == 1 else f"{len(names)} GPUs")
    return ", ".join(bits)


def _fit(head: str, tail: str, limit: int) -> str:
    """``head`` then ``tail``, cutting the head (never the verdict word) to stay within ``limit``."""
    if len(head) + len(tail) <= limit:
        return head + tail
    room = max(limit - len(tail) - 3, len(head.split(" ", 1)[0]))
    return (head[:room].rstrip() + "..." + tail)[:limit]

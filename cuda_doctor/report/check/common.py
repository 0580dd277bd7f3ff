"""What the check report's formats share: marks, ordering and the summary line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from cuda_doctor.core.families import not_checked
from cuda_doctor.core.pipeline import skipped_probes
from cuda_doctor.core.results import Result, Severity, Status, caused, no_verdict
from cuda_doctor.core.results import exit_code as results_exit_code
from cuda_doctor.core.selection import DESELECTED
from cuda_doctor.report import count

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report

#: Each status's mark and its style on a terminal.
_LOOKS = {
    Status.PASS: ("✓", "green"), Status.FAIL: ("✗", "bold red"), Status.WARN: ("!", "yellow"),
    Status.INFO: ("i", "cyan"), Status.UNKNOWN: ("?", "magenta"), Status.SKIPPED: ("-", "dim"),
    Status.ERROR: ("✗", "bold red"),
}  # fmt: skip
MARKS = {status: mark for status, (mark, _) in _LOOKS.items()}
STYLES = {status: style for status, (_, style) in _LOOKS.items()}
#: Worst first, for ordering and a category's headline mark.
ORDER = [Status.ERROR, Status.FAIL, Status.WARN, Status.UNKNOWN, Status.INFO, Status.PASS, Status.SKIPPED]
#: Categories in the order they are shown, with their titles.
CATEGORY_TITLES = {
    "driver": "NVIDIA driver", "gpu": "GPUs", "framework": "Framework build",
    "libraries": "CUDA libraries and extensions", "container": "Container", "environment": "Environment",
    "health": "GPU health", "smoke": "GPU smoke run", "performance": "Performance", "multi-gpu": "Multi-GPU",
    "docker": "Docker", "toolkit": "System CUDA toolkit",
}  # fmt: skip
#: The summary line's counts in order, each with its word ("failed" and "passed" even when 0).
_COUNTED = (
    (Status.FAIL, "failed"), (Status.ERROR, "rule error"), (Status.WARN, "warning"),
    (Status.UNKNOWN, "could not check"), (Status.INFO, "info"), (Status.PASS, "passed"), (Status.SKIPPED, "skipped"),
)  # fmt: skip


def worst(results: Iterable[Result]) -> Status:
    statuses = {r.status for r in results}
    return next((s for s in ORDER if s in statuses), Status.SKIPPED)


def grouped(results: list[Result]) -> list[tuple[str, list[Result]]]:
    by_category: dict[str, list[Result]] = {}
    for result in results:
        by_category.setdefault(result.category, []).append(result)
    known = [c for c in CATEGORY_TITLES if c in by_category]
    others = sorted(c for c in by_category if c not in CATEGORY_TITLES)
    return [(c, sorted(by_category[c], key=lambda r: (ORDER.index(r.status), r.rule_id))) for c in known + others]


class Causes:
    """Which results another one's failure explains (``Result.because``): each cause's
    consequences, shown with it rather than in their own sections."""

    def __init__(self, results: list[Result]) -> None:
        self.by_cause = caused(results)
        self.linked = {id(r) for group in self.by_cause.values() for r in group}

    def of(self, cause: Result) -> list[Result]:
        """The results ``cause``'s failure explains, in order."""
        return self.by_cause.get((cause.rule_id, cause.subject), [])

    def is_consequence(self, result: Result) -> bool:
        return id(result) in self.linked


def consequence_line(consequences: list[Result]) -> str:
    """ "5 more checks failed because of this: CD111, CD202, CD245, CD701, CD703"."""
    return f"{count(len(consequences), 'more check')} {verb(consequences)} because of this: {rule_ids(consequences)}"


def verb(results: list[Result]) -> str:
    """What ``results`` did: "failed", "warned", or "failed or warned"."""
    statuses = {r.status for r in results}
    return "warned" if statuses == {Status.WARN} else "failed" if Status.WARN not in statuses else "failed or warned"


def rule_ids(results: list[Result]) -> str:
    """Each rule id once, counted when it is there for several subjects: "CD231 ×2, CD703"."""
    times: dict[str, int] = {}
    for result in results:
        times[result.rule_id] = times.get(result.rule_id, 0) + 1
    return ", ".join(rule_id + (f" ×{n}" if n > 1 else "") for rule_id, n in times.items())


def visible(result: Result, verbose: bool) -> bool:
    return verbose or result.status not in (Status.PASS, Status.SKIPPED)


def summary_line(report: Report, fail_on: Severity) -> str:
    """The counts, then the verdict: what the exit status means, in words."""
    counts = report.counts()
    parts = []
    for status, word in _COUNTED:
        n = counts.get(status.value, 0)
        if n or status in (Status.FAIL, Status.PASS):
            parts.append(count(n, word) if word in ("warning", "rule error") else f"{n} {word}")
    exit_code = report.exit_code(fail_on)
    return f"{', '.join(parts)} — {verdict(report, exit_code, fail_on)} (exit {exit_code})"


def verdict(report: Report, exit_code: int, fail_on: Severity) -> str:
    """ "ready to train" only when everything was checked (framework included) and nothing failed."""
    if report.save_error is not None:  # the findings' own verdict, then why the run still fails
        judged = verdict(replace(report, save_error=None), results_exit_code(report.results, fail_on), fail_on)
        return f"{judged}, but the report was not saved: {report.save_error}"
    if exit_code == 1:
        return f"findings at or above '{fail_on.value}'"
    why = no_verdict(report.results)
    if why is not None:
        return f"no verdict: {why}"
    if any(r.status is Status.UNKNOWN for r in report.results):
        return "nothing failed, but some checks could not run"
    if any(r.status is Status.SKIPPED and r.message in DESELECTED for r in report.results):
        return "nothing failed in the selected checks"
    framework = skipped_probes(report.facts).get("framework")
    if framework is not None:
        return f"driver and GPUs ready; framework {not_checked(framework)}"
    return "ready to train"

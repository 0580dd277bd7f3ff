"""Which GPU runs (the smoke run, the NCCL all-reduce) each report made: when only one report
ran one, ``diff`` says so once instead of listing each rule, check and figure of it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from cuda_doctor.core.families import provider
from cuda_doctor.core.reportfile import SavedReport
from cuda_doctor.core.results import Result, Status

#: The probes that put work on the GPU, as people call them.
GPU_RUNS: tuple[tuple[str, str], ...] = (("smoke", "the smoke run"), ("nccl", "the NCCL all-reduce"))


@dataclass(frozen=True)
class NotRun:
    probe: str  # "smoke"
    label: str  # "the smoke run"
    missing_in: str  # "before" | "after": the report that did not run it
    reason: str | None  # why, as that report says ("--fast", "--no-smoke"), when it says
    rules: int = 0  # rule outcomes left out of the comparison because of it


def ran(report: SavedReport, probe: str) -> bool:
    status = report.values.get(f"probe.{probe}.status")
    if status is not None:
        return status != "skipped"
    return any(_is_of(name, probe) for name in report.values)


def not_run(before: SavedReport, after: SavedReport) -> tuple[NotRun, ...]:
    """The GPU runs that exactly one of the two reports made."""
    out = []
    for probe, label in GPU_RUNS:
        did_before, did_after = ran(before, probe), ran(after, probe)
        if did_before != did_after:
            missing = after if did_before else before
            reason = missing.values.get(f"probe.{probe}.reason")
            out.append(NotRun(probe, label, "after" if did_before else "before", str(reason) if reason else None))
    return tuple(out)


def _is_of(fact: str, probe: str) -> bool:
    return provider(fact.removeprefix("derived.")) == probe


@functools.cache
def _rules_of_probes() -> dict[str, frozenset[str]]:
    """The built-in rules that judge each GPU run's facts: their results say nothing when it did not run."""
    from cuda_doctor.core.rules import RuleFileError, load_rules

    try:
        rules = load_rules()
    except RuleFileError:
        return {}  # then only the evidence in the results tells
    return {
        probe: frozenset(
            rule.id
            for rule in rules
            if any(_is_of(fact, probe) for fact in rule.requires)
            or (rule.for_each is not None and _is_of(f"{rule.for_each}[0].", probe))
        )
        for probe, _label in GPU_RUNS
    }


def gap_of(gaps: tuple[NotRun, ...], rule: str, old: Result | None, new: Result | None) -> NotRun | None:
    """The run whose absence explains this rule's change, or None when the change is real (a
    finding in AFTER measured while BEFORE did not look is news)."""
    evidence = [*(old.evidence if old else ()), *(new.evidence if new else ())]
    news = new is not None and new.status in (Status.WARN, Status.FAIL, Status.ERROR)
    for gap in gaps:
        if gap.missing_in == "before" and news:
            continue
        if rule in _rules_of_probes().get(gap.probe, frozenset()) or any(_is_of(f, gap.probe) for f in evidence):
            return gap
    return None

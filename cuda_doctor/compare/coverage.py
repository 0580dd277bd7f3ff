"""Which GPU runs (the smoke run, the NCCL all-reduce) each report made.

When one report ran a probe and the other did not (``--fast``, ``--no-smoke``), every rule,
check and figure of that probe differs between the two for that reason alone.  ``diff`` then
says so once ("the smoke run was not run in AFTER") instead of listing each of them.
"""

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
    """The built-in rules that judge each GPU run's facts (``requires`` or ``for_each``): their
    results say nothing when the run did not happen, skipped ones included."""
    from cuda_doctor.core.rules import RuleFileError, load_rules

    try:
        rules = load_rules()
    except RuleFileError:
        return {}  # then only the evidence in the results tells
    out: dict[str, frozenset[str]] = {}
    for probe, _label in GPU_RUNS:
        out[probe] = frozenset(
            rule.id
            for rule in rules
            if any(_is_of(fact, probe) for fact in rule.requires)
            or (rule.for_each is not None and _is_of(f"{rule.for_each}[0].", probe))
        )
    return out


def gap_of(gaps: tuple[NotRun, ...], rule: str, old: Result | None, new: Result | None) -> NotRun | None:
    """The run whose absence explains this rule's change, or None when the change is real.

    A finding in AFTER stays listed when the run is missing in BEFORE: a failure the newer
    report measured is news, even though the older one did not look."""
    for gap in gaps:
        evidence = [*(old.evidence if old else ()), *(new.evidence if new else ())]
        belongs = rule in _rules_of_probes().get(gap.probe, frozenset()) or any(
            _is_of(fact, gap.probe) for fact in evidence
        )
        if not belongs:
            continue
        if gap.missing_in == "before" and new is not None and new.status in (Status.WARN, Status.FAIL, Status.ERROR):
            continue
        return gap
    return None

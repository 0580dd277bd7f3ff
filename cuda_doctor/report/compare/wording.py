"""Wording shared by the text and Markdown comparison reporters."""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

from cuda_doctor.compare.coverage import NotRun
from cuda_doctor.compare.diff import Diff, FactChange
from cuda_doctor.compare.fleet import Fleet, Outlier
from cuda_doctor.compare.keys import show
from cuda_doctor.core.results import Status
from cuda_doctor.report import count

FIGURE_NOTES = {"slower": "← slower", "faster": "faster", "same": "within noise", "missing": "not measured in both"}


def fact_side(change: FactChange, after: bool) -> str:
    state = change.after_state if after else change.before_state
    if state != "known":
        return state  # "unknown" or "not installed"
    return show(change.after if after else change.before)


def fact_note(change: FactChange) -> str:
    if change.downgrade:
        return "downgraded"
    return "lost" if change.lost else ""


def status_text(status: Status | None) -> str:
    return status.value if status else "—"


def env_side(value: str | None) -> str:
    return "not set" if value is None else (value or '""')


def not_run_note(gap: NotRun) -> str:
    """One line for everything a GPU run made by one report only changes."""
    why = f" ({gap.reason})" if gap.reason else ""
    what = "its checks and figures" if gap.probe == "smoke" else "its results"
    rules = f"{count(gap.rules, 'rule outcome')} and {what}" if gap.rules else what
    return f"{gap.label} was not run in {gap.missing_in.upper()}{why}: {rules} not compared"


def no_results_note(diff: Diff) -> str | None:
    """Why rule outcomes were not compared, or None when they were."""
    if diff.rules_compared:
        return None
    sides = ["the first report" if r is diff.before else "the second report" for r in diff.without_results]
    who = " and ".join(sides)
    verb = "have" if len(sides) > 1 else "has"
    return f"{who} {verb} no rule results (facts only): comparing facts only, rule outcomes not compared"


def figure_value(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _counted(*items: tuple[Sized, str, str]) -> list[str]:
    """``count`` of each collection that is not empty: (items, one, many)."""
    return [count(len(things), one, many) for things, one, many in items if things]


def diff_verdict(diff: Diff) -> str:
    suffix = "" if diff.rules_compared else " (facts only: rule outcomes not compared)"
    if diff.worse:
        return f"worse: {', '.join(_worse_parts(diff))}{suffix}"
    if diff.changed:
        good = _counted(
            (diff.fixed, "rule fixed", "rules fixed"),
            (diff.faster, "figure faster", "figures faster"),
            (diff.facts, "fact changed", "facts changed"),
            (diff.environment, "environment variable changed", "environment variables changed"),
        )
        return "nothing got worse" + (": " + ", ".join(good) if good else "") + suffix
    return "no change" + suffix


def _worse_parts(diff: Diff) -> list[str]:
    parts = _counted((diff.newly_failing, "rule newly failing", "rules newly failing"))
    if diff.lost_facts:
        lost = ", ".join(f"{f.label} {f.after_state}" for f in diff.lost_facts)
        parts.append(count(len(diff.lost_facts), "key fact lost", "key facts lost") + f" ({lost})")
    parts += [f"{f.label} downgraded ({fact_side(f, False)} → {fact_side(f, True)})" for f in diff.downgrades]
    parts += [f"{e.variable}={env_side(e.after)} {e.note}" for e in diff.worse_environment]
    return parts + _counted(
        (diff.broken_checks, "smoke check broken", "smoke checks broken"),
        (diff.slower, "figure slower", "figures slower"),
    )


def fleet_verdict(fleet: Fleet) -> str:
    parts = [count(len(fleet.nodes), "node"), *_counted((fleet.errors, "report unreadable", "reports unreadable"))]
    parts.append(f"{len(fleet.differing)} differing from the majority")
    parts.append(f"{len(fleet.failing)} with failing rules")
    hosts = {o.host for o in fleet.outliers}
    outliers = count(len(fleet.outliers), "performance outlier")
    parts.append(f"{outliers} on {count(len(hosts), 'node')}")
    return ", ".join(parts)


def tie_note(fleet: Fleet) -> str:
    """How a tie for the majority was broken."""
    others = count(len(fleet.tied_with), "other configuration")
    return (
        f"tie: {others} with {fleet.majority_count} nodes each; "
        "showing the one with the most known facts (then the first by value)"
    )


def fleet_notes(fleet: Fleet) -> list[str]:
    """What to know of the reports given: paths given twice, hosts with more than one report."""
    notes = []
    if fleet.repeated:
        notes.append(f"given more than once, counted once: {', '.join(fleet.repeated)}")
    if fleet.duplicates:
        notes.append(f"more than one report for: {', '.join(fleet.duplicates)}")
    return notes


def config_value(value: Any) -> str:
    return "unknown" if value is None else show(value)


def gpus_text(gpu_count: Any, model: Any) -> str:
    if gpu_count is None and model is None:
        return "unknown"
    return f"{config_value(gpu_count)}× {config_value(model)}"


def outlier_text(o: Outlier) -> str:
    z = "" if o.z is None else f", robust z {o.z:+.1f}"
    return f"{o.label} {o.value:.4g} {o.unit} = {o.ratio:.2f}× the median {o.median:.4g} of {o.gpu_model}{z}"

"""Wording shared by the text and Markdown comparison reporters."""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

from cuda_doctor.compare.coverage import NotRun
from cuda_doctor.compare.diff import Diff, FactChange, FigureChange, RuleFlip
from cuda_doctor.compare.fleet import Fleet, Outlier
from cuda_doctor.compare.gpus import GpusOnlyIn, Group, index_ranges, without_own_index
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


def gpus_only_note(only: GpusOnlyIn) -> str:
    """ "299 GPUs only in AFTER (b.json): GPU 1–299, all NVIDIA H200"."""
    n = len(only.gpus)
    if len(only.models) == 1:
        model = only.models[0][0]
        models = f"an {model}" if n == 1 and model[:1].upper() in "AEIOU" else model if n == 1 else f"all {model}"
    else:
        models = ", ".join(f"{many}× {model}" for model, many in only.models)
    gpus = "GPU" if n == 1 else "GPUs"
    return f"{count(n, 'GPU')} only in {only.side.upper()} ({only.path}): {gpus} {index_ranges(only.gpus)}, {models}"


GROUPED_NOTE = "a difference that is the same on several GPUs is said once; -v lists every GPU's line"


def is_grouped(groups: list[Group[Any]]) -> bool:
    return any(len(group.members) > 1 for group in groups)


def group_subject(group: Group[Any], subject: str | None) -> str:
    """The subject of a row: its own, or ``GPU 1–299 (299 GPUs)`` for a group."""
    if len(group.members) == 1:
        return subject or ""
    return f"GPU {index_ranges(group.gpus)} ({len(group.gpus)} GPUs)"


def group_gpus(group: Group[Any]) -> str:
    """A group's GPU column: ``3``, or ``1–299``."""
    return index_ranges(group.gpus)


def group_message(group: Group[RuleFlip]) -> str:
    """A rule's message, said of every GPU of a group: "each GPU has retired pages pending"."""
    first = group.first
    if len(group.members) == 1 or not group.gpus:
        return first.message
    return without_own_index(first.message, group.gpus[0]).replace("GPU #", "each GPU")


def figure_span(group: Group[FigureChange], after: bool) -> str:
    """A group's figure before or after: one value, or the lowest–highest."""
    values = [f.after if after else f.before for f in group.members]
    known = sorted(v for v in values if v is not None)
    if not known:
        return figure_value(None)
    low, high = figure_value(known[0]), figure_value(known[-1])
    missing = " (and —)" if len(known) < len(values) else ""
    return (low if low == high else f"{low}–{high}") + missing


def ratio_span(group: Group[FigureChange]) -> str:
    ratios = sorted(f.ratio for f in group.members if f.ratio is not None)
    if not ratios:
        return ratio(None)
    low, high = ratio(ratios[0]), ratio(ratios[-1])
    return low if low == high else f"{low[:-1]}–{high}"

"""Before/after comparison of two reports of one machine."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from cuda_doctor.compare.coverage import NotRun, gap_of, not_run
from cuda_doctor.compare.environment import EnvChange, diff_environment
from cuda_doctor.compare.gpus import (
    GROUP_FROM,
    GpusOnlyIn,
    Group,
    gpus_only,
    grouped,
    natural_key,
    subject_gpu,
    without_own_index,
)
from cuda_doctor.compare.keys import KEY_FACTS, METRICS, SMOKE_CHECKS, key_fact, number, smoke_indices, state
from cuda_doctor.core.reportfile import SavedReport
from cuda_doctor.core.results import FINDING_RANK, Status

DEFAULT_NOISE = 0.05

#: A finding at or above this rank (warn) counts as "failing" for the worse verdict.
_FAILING_RANK = FINDING_RANK[Status.WARN]
#: Key facts whose going down is a downgrade: dotted NVIDIA numbers, or a Python package version.
_NVIDIA_VERSIONS = ("driver.version", "driver.cuda_version", "torch.cuda_build")
_PACKAGE_VERSIONS = ("torch.version", "tensorflow.version")


@dataclass(frozen=True)
class FactChange:
    name: str
    label: str
    before: Any  # None is a real value (e.g. a CPU-only torch has no CUDA build)
    after: Any
    before_known: bool
    after_known: bool
    before_state: str  # "known" | "unknown" | "not installed"
    after_state: str
    lost: bool  # known before, unknown or not installed after: worse
    downgrade: bool = False  # an older driver, CUDA, framework or CUDA build after: worse


@dataclass(frozen=True)
class RuleFlip:
    rule: str
    subject: str | None
    title: str
    before: Status | None  # None: the rule did not report on this subject then
    after: Status | None
    direction: str  # "worse" | "better" | "changed"
    message: str  # the newer message (what to read to act on it)


@dataclass(frozen=True)
class FigureChange:
    gpu: int
    metric: str
    label: str
    unit: str
    before: float | None
    after: float | None
    ratio: float | None  # after / before
    verdict: str  # "faster" | "slower" | "same" | "missing"


@dataclass(frozen=True)
class CheckChange:
    name: str  # "smoke.status" or "smoke[0].conv_ok"
    label: str
    before: Any
    after: Any
    worse: bool

    @property
    def check(self) -> str:
        """What is checked, without its GPU: "convolution" of "GPU 3 convolution"."""
        return SMOKE_CHECKS.get(self.name.partition(".")[2], self.label)


@dataclass(frozen=True)
class Diff:
    before: SavedReport
    after: SavedReport
    noise: float
    facts: tuple[FactChange, ...]
    rules: tuple[RuleFlip, ...]
    figures: tuple[FigureChange, ...]  # every figure measured in either report, changed or not
    checks: tuple[CheckChange, ...]
    without_results: tuple[SavedReport, ...] = ()  # facts only: then rule outcomes are not compared
    environment: tuple[EnvChange, ...] = ()
    not_run: tuple[NotRun, ...] = ()  # GPU runs only one report made: their results are not compared
    gpus_only: tuple[GpusOnlyIn, ...] = ()  # GPUs one report has and the other has not

    @property
    def rules_compared(self) -> bool:
        return not self.without_results

    @property
    def lost_facts(self) -> tuple[FactChange, ...]:
        return tuple(f for f in self.facts if f.lost)

    @property
    def downgrades(self) -> tuple[FactChange, ...]:
        return tuple(f for f in self.facts if f.downgrade)

    @property
    def worse_environment(self) -> tuple[EnvChange, ...]:
        return tuple(e for e in self.environment if e.worse)

    @property
    def newly_failing(self) -> tuple[RuleFlip, ...]:
        return tuple(r for r in self.rules if r.direction == "worse")

    @property
    def fixed(self) -> tuple[RuleFlip, ...]:
        return tuple(r for r in self.rules if r.direction == "better")

    @property
    def slower(self) -> tuple[FigureChange, ...]:
        return tuple(f for f in self.figures if f.verdict == "slower")

    @property
    def faster(self) -> tuple[FigureChange, ...]:
        return tuple(f for f in self.figures if f.verdict == "faster")

    @property
    def broken_checks(self) -> tuple[CheckChange, ...]:
        return tuple(c for c in self.checks if c.worse)

    @property
    def worse(self) -> bool:
        """A rule newly failing, a key fact lost or downgraded, GPUs hidden, a figure slower, a check broken."""
        return bool(
            self.newly_failing
            or self.lost_facts
            or self.downgrades
            or self.worse_environment
            or self.slower
            or self.broken_checks
        )

    @property
    def changed(self) -> bool:
        return bool(
            self.facts or self.rules or self.checks or self.slower or self.faster or self.environment or self.not_run
        )

    @property
    def same_host(self) -> bool:
        return self.before.host == self.after.host


def diff_reports(before: SavedReport, after: SavedReport, noise: float = DEFAULT_NOISE) -> Diff:
    if not 0 <= noise < 1:
        raise ValueError(f"noise band must be a fraction in [0, 1), got {noise}")
    without = tuple(r for r in (before, after) if not r.has_results)
    gaps = not_run(before, after)
    rules: tuple[RuleFlip, ...] = ()
    if not without:
        rules, gaps = _rule_flips(before, after, gaps)
    smoke_compared = not any(g.probe == "smoke" for g in gaps)
    return Diff(
        before=before,
        after=after,
        noise=noise,
        facts=diff_facts(before, after),
        rules=rules,
        figures=diff_figures(before, after, noise) if smoke_compared else (),
        checks=diff_checks(before, after) if smoke_compared else (),
        without_results=without,
        environment=diff_environment(before, after),
        not_run=gaps,
        gpus_only=gpus_only(before, after),
    )


def rule_groups(diff: Diff, least: int = GROUP_FROM) -> list[Group[RuleFlip]]:
    """The rule flips, those the same on many GPUs (rule, before, after, message) said once."""
    return grouped(
        diff.rules,
        lambda r: subject_gpu(r.subject),
        lambda r: (r.rule, r.before, r.after, without_own_index(r.message, subject_gpu(r.subject) or 0)),
        least,
    )


def check_groups(diff: Diff, least: int = GROUP_FROM) -> list[Group[CheckChange]]:
    """The smoke checks that changed, those the same on many GPUs (check, before, after) said once."""
    return grouped(diff.checks, _check_gpu, lambda c: (c.name.partition(".")[2], repr(c.before), repr(c.after)), least)


def figure_groups(diff: Diff, least: int = GROUP_FROM) -> list[Group[FigureChange]]:
    """The smoke figures; those of many GPUs with one verdict (figure, verdict) said once."""
    return grouped(diff.figures, lambda f: f.gpu, lambda f: (f.metric, f.verdict), least)


def _check_gpu(change: CheckChange) -> int | None:
    """``smoke[3].conv_ok`` → 3; None for ``smoke.status``."""
    head = change.name.partition(".")[0]
    return int(head[6:-1]) if head.startswith("smoke[") else None


def _rule_flips(
    before: SavedReport, after: SavedReport, gaps: tuple[NotRun, ...]
) -> tuple[tuple[RuleFlip, ...], tuple[NotRun, ...]]:
    """The rule outcomes that differ, worst first; and ``gaps``, each with the changes it explains (left out)."""
    old = {(r.rule_id, r.subject): r for r in before.results}
    new = {(r.rule_id, r.subject): r for r in after.results}
    left_out: Counter[str] = Counter()
    flips: list[RuleFlip] = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: (k[0], natural_key(k[1] or ""))):
        a, b = old.get(key), new.get(key)
        sa, sb = (a.status if a else None), (b.status if b else None)
        shown = b if b is not None else a
        if sa == sb or shown is None:
            continue
        gap = gap_of(gaps, key[0], a, b)
        if gap is not None:
            left_out[gap.probe] += 1
        else:
            flips.append(RuleFlip(key[0], key[1], shown.title, sa, sb, _direction(sa, sb), shown.message))
    order = {"worse": 0, "better": 1, "changed": 2}
    flips.sort(key=lambda f: (order[f.direction], -_rank(f.after), f.rule, natural_key(f.subject or "")))
    return tuple(flips), tuple(replace(g, rules=left_out[g.probe]) for g in gaps)


def is_downgrade(name: str, old: Any, new: Any) -> bool:
    """An older driver, CUDA, framework or CUDA build (a CPU-only torch too); unreadable values are not."""
    if name == "torch.cuda_build" and old is not None and new is None:
        return True
    if name in _NVIDIA_VERSIONS:
        from cuda_doctor.tables.versions import nvidia_version

        a, b = nvidia_version(old), nvidia_version(new)
        return a is not None and b is not None and b < a
    if name in _PACKAGE_VERSIONS:
        from packaging.version import InvalidVersion, Version

        try:
            return Version(str(new)).release < Version(str(old)).release
        except InvalidVersion:
            return False
    return False


def diff_facts(before: SavedReport, after: SavedReport) -> tuple[FactChange, ...]:
    changes: list[FactChange] = []
    for name, label in KEY_FACTS.items():
        old, new = key_fact(before, name), key_fact(after, name)
        old_state, new_state = state(old), state(new)
        if old_state == new_state and (old_state != "known" or old == new):
            continue
        changes.append(
            FactChange(
                name=name,
                label=label,
                before=old if old_state == "known" else None,
                after=new if new_state == "known" else None,
                before_known=old_state == "known",
                after_known=new_state == "known",
                before_state=old_state,
                after_state=new_state,
                lost=old_state == "known" and new_state != "known",
                downgrade=old_state == new_state == "known" and is_downgrade(name, old, new),
            )
        )
    return tuple(changes)


def _rank(status: Status | None) -> int:
    return 0 if status is None else FINDING_RANK.get(status, 0)


def _direction(old: Status | None, new: Status | None) -> str:
    old_rank, new_rank = _rank(old), _rank(new)
    if new_rank >= _FAILING_RANK and new_rank > old_rank:
        return "worse"
    if old_rank >= _FAILING_RANK and new_rank < old_rank:
        return "better"
    return "changed"


def _verdict(ratio: float, noise: float, higher_is_better: bool) -> str:
    if (1 - noise) <= ratio <= (1 + noise):
        return "same"
    improved = ratio > 1 if higher_is_better else ratio < 1
    return "faster" if improved else "slower"


def diff_figures(before: SavedReport, after: SavedReport, noise: float) -> tuple[FigureChange, ...]:
    out: list[FigureChange] = []
    for i in sorted(set(smoke_indices(before)) | set(smoke_indices(after))):
        for m in METRICS:
            name = f"smoke[{i}].{m.key}"
            old, new = number(before.get(name)), number(after.get(name))
            if old is None and new is None:
                continue
            if old is None or new is None or old <= 0:
                ratio, verdict = None, "missing"
            else:
                ratio = new / old
                verdict = _verdict(ratio, noise, m.higher_is_better)
            out.append(FigureChange(i, m.key, m.label, m.unit, old, new, ratio, verdict))
    return tuple(out)


def diff_checks(before: SavedReport, after: SavedReport) -> tuple[CheckChange, ...]:
    out: list[CheckChange] = []
    old_status, new_status = before.get("smoke.status"), after.get("smoke.status")
    if old_status != new_status:
        worse = old_status == "ok" and new_status in ("failed", "timeout")
        out.append(CheckChange("smoke.status", "smoke run", old_status, new_status, worse=worse))
    for i in sorted(set(smoke_indices(before)) | set(smoke_indices(after))):
        for key, label in SMOKE_CHECKS.items():
            name = f"smoke[{i}].{key}"
            old, new = before.get(name), after.get(name)
            if old != new:
                out.append(CheckChange(name, f"GPU {i} {label}", old, new, worse=old is True and new is False))
    return tuple(out)

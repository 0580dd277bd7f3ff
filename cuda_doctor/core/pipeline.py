"""probes → facts → derived facts → rules → results: the one pipeline every command uses.

This module only orchestrates: the report it returns is ``checkreport.Report``, and a saved
report is read back by ``reportfile``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from cuda_doctor.base import tomlcache
from cuda_doctor.base.secrets import redact, redact_value
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.config import Config
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.families import DERIVERS, PROBES, STARTED_FIRST, load, not_checked, provider, runs_fast
from cuda_doctor.core.probe import Probe, ProbeContext
from cuda_doctor.core.results import Result, Status
from cuda_doctor.core.rules import Judgement, Rule, judge, load_rules
from cuda_doctor.core.selection import check_selection

#: Called with ("start" | "done", probe name) so a terminal can show progress; "done" comes
#: from the probe's own thread as it ends.
Progress = Callable[[str, str], None]


# -- probing -----------------------------------------------------------------------------------


Deriver = Callable[[Facts], None]


def default_probes(phase: int, ctx: ProbeContext, first: Sequence[str] = ()) -> Iterator[Probe]:
    """The phase's probes, each imported only when its turn comes: those named in ``first`` first."""
    names = [name for name in PROBES if PROBES[name].phase == phase]
    for name in [name for name in first if name in names] + [name for name in names if name not in first]:
        if not ctx.fast or runs_fast(name, ctx.images):
            yield load(PROBES[name].module)


def skipped_probes(facts: Facts) -> dict[str, str]:
    """The probes that did not run → why (their ``probe.<name>.reason``)."""
    return {
        name: str(facts.get(f"probe.{name}.reason") or "not run")
        for name in PROBES
        if facts.get(f"probe.{name}.status") == "skipped"
    }


def _deadline(probe: Probe, ctx: ProbeContext) -> float:
    """Outer guard per probe; each probe bounds its own blocking calls well inside it.  A probe
    whose bounded calls can add up to more than the default says so with ``deadline(ctx)``."""
    own = getattr(probe, "deadline", None)
    return float(own(ctx)) if callable(own) else ctx.timeout * 3 + 5


def _skip(facts: Facts, name: str, ctx: ProbeContext) -> None:
    left_out = ctx.fast or (name in ("smoke", "nccl") and not ctx.smoke)
    if left_out and ctx.skipped_because:  # the command, not an option the user gave
        why = ctx.skipped_because
    elif ctx.fast:
        why = "--fast"
    elif left_out:
        why = "--no-smoke"
    else:
        why = "not applicable here"
    facts.set(f"probe.{name}.status", "skipped")
    facts.set(f"probe.{name}.reason", why)


def skipped_by_probe(results: list[Result], facts: Facts) -> list[Result]:
    """A rule left unknown or skipped only because the facts it needs come from a probe that did
    not run is skipped, saying which option (or command) left that probe out."""
    skipped = skipped_probes(facts)
    if not skipped:
        return results
    out = []
    for result in results:
        missing = [name for name in result.evidence if not facts.has(name)]
        if result.status in (Status.UNKNOWN, Status.SKIPPED) and missing:
            probes = [provider(name) for name in missing]
            if all(probe in skipped for probe in probes):
                result = result._replace(status=Status.SKIPPED, message=not_checked(skipped[str(probes[0])]))
        out.append(result)
    return out


class _ProbeRun:
    """One probe on its own daemon thread; a probe must never take the doctor down."""

    def __init__(self, probe: Probe, ctx: ProbeContext, progress: Progress | None) -> None:
        self.probe = probe
        self.progress = progress
        self.result: Facts | None = None
        self.error: str | None = None
        self.seconds: float | None = None
        self.deadline = time.monotonic() + _deadline(probe, ctx)
        self.thread = threading.Thread(target=self._run, args=(ctx,), name=f"probe-{probe.name}", daemon=True)

    def _run(self, ctx: ProbeContext) -> None:
        start = time.monotonic()
        try:
            self.result = self.probe.collect(ctx)
        except BaseException as exc:  # even a SystemExit in a probe ends as a recorded reason
            self.error = f"{type(exc).__name__}: {exc}"
        self.seconds = round(time.monotonic() - start, 3)
        if self.progress:  # as it ends, not when its turn to be joined comes
            self.progress("done", self.probe.name)


def collect(ctx: ProbeContext, probes: Iterable[Probe], progress: Progress | None = None) -> Facts:
    """Run ``probes`` concurrently; a probe that raises or overruns becomes unknown facts."""
    return join(start(ctx, probes, progress), progress)


class Started:
    """Probes started by ``start``, for ``join``; in the order given, with what was learnt while
    starting them (a probe whose ``applies`` failed or said no)."""

    def __init__(self) -> None:
        self.facts = Facts()
        self.runs: list[_ProbeRun] = []


def start(ctx: ProbeContext, probes: Iterable[Probe], progress: Progress | None = None) -> Started:
    """Start each of ``probes`` on its own thread as soon as it is loaded (``probes`` may load
    them one at a time: a child that imports torch starts before the other modules load)."""
    started = Started()
    for probe in probes:
        try:
            applies = probe.applies(ctx)
        except Exception as exc:
            started.facts.mark_unknown(f"probe.{probe.name}", f"probe failed: {type(exc).__name__}: {exc}")
            continue
        if not applies:
            _skip(started.facts, probe.name, ctx)
            continue
        run = _ProbeRun(probe, ctx, progress)
        if progress:
            progress("start", probe.name)
        run.thread.start()
        started.runs.append(run)
    return started


def join(started: Started, progress: Progress | None = None, order: Sequence[str] = ()) -> Facts:
    """Wait for started probes, each until its deadline, and merge their facts: in ``order`` of
    their names where given (the phase's own order, whatever the order they started in)."""
    facts = started.facts
    runs = sorted(started.runs, key=lambda run: order.index(run.probe.name)) if order else started.runs
    for run in runs:
        name = run.probe.name
        run.thread.join(max(run.deadline - time.monotonic(), 0.1))
        if run.thread.is_alive():  # abandoned: daemon threads never keep the doctor alive
            facts.set(f"probe.{name}.status", "timeout")
            facts.mark_unknown(name, f"the {name} probe did not finish in time")
        elif run.error is not None:
            facts.set(f"probe.{name}.status", "error")
            facts.mark_unknown(name, f"the {name} probe failed: {run.error}")
        elif run.result is not None:
            facts.merge(without_secrets(run.result))
            facts.set(f"probe.{name}.status", "ok")
        facts.set(f"probe.{name}.seconds", run.seconds)  # None: still running when abandoned
        if progress and run.thread.is_alive():  # abandoned: it will never say it is done
            progress("done", name)
    return facts


def gather(
    ctx: ProbeContext,
    probes: Sequence[Probe] | None = None,
    progress: Progress | None = None,
    while_waiting: Callable[[], None] | None = None,
) -> Facts:
    """The facts of ``probes``, or of every default probe in its phase; ``while_waiting`` runs on
    this thread while phase 1's probes run (the check imports what judges the facts then)."""
    if probes is not None:
        with ctx.handoff.open():
            return collect(ctx, probes, progress)
    facts = Facts()
    if ctx.fast:
        for name in PROBES:
            if not runs_fast(name, ctx.images):
                _skip(facts, name, ctx)
    with ctx.handoff.open():  # a child left for a later phase is stopped when the phases end
        first = start(ctx, default_probes(1, ctx, STARTED_FIRST), progress)
        later = list(default_probes(2, ctx))  # imported while phase 1 runs
        if while_waiting is not None:
            while_waiting()
        facts.merge(join(first, progress, order=list(PROBES)))
        # phase 2 probes load the GPU: one at a time, so that none measures another's work
        for probe in later:
            facts.merge(collect(ctx, [probe], progress))
    return facts


def without_secrets(facts: Facts) -> Facts:
    """``facts`` with no credential in any value (``DOCKER_HOST=tcp://user:password@host``)."""
    for name, value in facts.values.items():
        facts.values[name] = redact_value(value)
    for name, reason in facts.unknown.items():
        facts.unknown[name] = redact(reason)
    return facts


# -- deriving and judging --------------------------------------------------------------------------------------


def import_derivers() -> None:
    """Import every deriver's module now, ahead of ``derive_all``: a full check does it while its
    probes wait on their children, so that judging starts as soon as they are done."""
    for spec, _inputs in DERIVERS:
        load(spec)


def derive_all(facts: Facts) -> list[str]:
    """Run every deriver; return one message per deriver that broke (they never stop the run)."""
    problems: list[str] = []
    names = [name for name, value in facts.values.items() if value is not None] + list(facts.unknown)
    for spec, inputs in DERIVERS:
        if inputs and not any(name.startswith(inputs) for name in names):
            continue  # nothing for it to derive from: skip even its import
        deriver: Deriver = load(spec)
        try:
            deriver(facts)
        except Exception as exc:  # a broken deriver must not hide the other checks
            problems.append(f"{spec}: {type(exc).__name__}: {exc}")
    tomlcache.flush()  # the tables the derivers parsed, in one write
    return problems


def judge_facts(
    facts: Facts,
    config: Config,
    *,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    rules: Sequence[Rule] | None = None,
) -> tuple[list[Result], list[str]]:
    """Derive, then judge.  Returns the results and any internal problems met on the way."""
    for name in [name for name in facts.values if name.startswith("config.")]:  # a saved run's, replaced
        del facts.values[name]
    for name, value in config.facts().items():
        facts.set(name, value)
    facts_problems = derive_all(facts)
    loaded = list(rules) if rules is not None else load_rules(config.rules_dirs)
    check_selection(loaded, "env", config, select, ignore)
    results = judge(
        loaded,
        facts,
        select=select,
        ignore=ignore,
        configured=(config.select, config.ignore),
        judgement=Judgement(config.severity),
    )
    return skipped_by_probe(results, facts), facts_problems


def run_check(
    ctx: ProbeContext,
    config: Config,
    *,
    probes: Sequence[Probe] | None = None,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    progress: Progress | None = None,
    command: str = "check",
) -> Report:
    # Rules load while the probes wait on the driver and on subprocesses (those waits release
    # the GIL), so a fast check costs hardly more than its slowest probe.
    began = time.monotonic()
    loaded: list[Rule] = []
    failure: list[Exception] = []

    def load() -> None:
        try:
            loaded.extend(load_rules(config.rules_dirs))
        except Exception as exc:  # re-raised below, in the caller's thread
            failure.append(exc)

    loader = threading.Thread(target=load, name="load-rules", daemon=True)
    loader.start()
    facts = gather(ctx, probes, progress, while_waiting=None if ctx.fast else import_derivers)
    loader.join()
    if failure:
        raise failure[0]
    results, problems = judge_facts(facts, config, select=select, ignore=ignore, rules=loaded)
    seconds = round(time.monotonic() - began, 3)
    return Report(facts=facts, results=results, command=command, problems=problems, seconds=seconds)


def rejudge(path: Path, config: Config, *, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> Report:
    """Judge the facts of a saved report or facts file again, with this version's rules."""
    from cuda_doctor.core.reportfile import load_report  # only re-judging reads a saved file

    saved = load_report(path)
    # derived facts are recomputed with this version's tables
    facts = without_secrets(
        Facts(
            {k: v for k, v in saved.values.items() if not k.startswith("derived.")},
            {k: v for k, v in saved.unknown.items() if not k.startswith("derived.")},
        )
    )
    results, problems = judge_facts(facts, config, select=select, ignore=ignore)
    results = [not_in_report(result, facts) for result in results]
    return Report(facts=facts, results=results, host=saved.host, problems=problems)


def not_in_report(result: Result, facts: Facts) -> Result:
    """A check whose facts a saved report lacks altogether, from a probe that ran without
    trouble or is not in the report at all (the report was written by a cuda-doctor that did not
    gather them yet), is skipped, not "could not check".  A probe that timed out keeps its
    checks unknown."""
    if result.status is not Status.UNKNOWN or not result.evidence:
        return result
    for name in result.evidence:
        probe = provider(name)
        # a fact of a probe that always runs (GPU, environment) is missing, not left out
        if facts.has(name) or facts.reason(name) is not None or probe is None or PROBES[probe].fast:
            return result  # known, or unknown for a reason the report gives
        if facts.get(f"probe.{probe}.status") not in (None, "ok"):
            return result
    return result._replace(status=Status.SKIPPED, message="not in this report: it was saved without these facts")

"""probes → facts → derived facts → rules → results: the one pipeline every command uses.

This module only orchestrates: the report it returns is ``checkreport.Report``, and a saved
report is read back by ``reportfile``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from cuda_doctor.checkreport import Report
from cuda_doctor.config import Config
from cuda_doctor.facts import Facts
from cuda_doctor.knowledge import derive_all
from cuda_doctor.optional import optional_attribute
from cuda_doctor.probes import PHASE_1, PHASE_2, PROBES, PROVIDES, not_checked, runs_fast, skipped_probes
from cuda_doctor.probes.base import Probe, ProbeContext
from cuda_doctor.results import Result, Status
from cuda_doctor.rules import Judgement, Rule, judge, load_rules
from cuda_doctor.selection import check_selection

#: Called with ("start" | "done", probe name) so a terminal can show progress; "done" comes
#: from the probe's own thread as it ends.
Progress = Callable[[str, str], None]


# -- probing -----------------------------------------------------------------------------------


def load_probe(module_name: str) -> Probe | None:
    probe: Probe | None = optional_attribute(module_name, "PROBE")
    return probe


def default_probes(phase: Mapping[str, str], ctx: ProbeContext) -> list[Probe]:
    probes = []
    for name, module_name in phase.items():
        if ctx.fast and not runs_fast(name, ctx.images):
            continue
        probe = load_probe(module_name)
        if probe is not None:
            probes.append(probe)
    return probes


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
    skipped = {name: why for name, why in skipped_probes(facts).items() if name in PROVIDES}
    if not skipped:
        return results
    out = []
    for result in results:
        missing = [name for name in result.evidence if not facts.has(name)]
        if result.status in (Status.UNKNOWN, Status.SKIPPED) and missing:
            probes = [next((p for p in skipped if name.startswith(PROVIDES[p])), None) for name in missing]
            if None not in probes:
                result = replace(result, status=Status.SKIPPED, message=not_checked(skipped[str(probes[0])]))
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


def collect(ctx: ProbeContext, probes: Sequence[Probe], progress: Progress | None = None) -> Facts:
    """Run ``probes`` concurrently; a probe that raises or overruns becomes unknown facts."""
    facts = Facts()
    active = []
    for probe in probes:
        try:
            applies = probe.applies(ctx)
        except Exception as exc:
            facts.mark_unknown(f"probe.{probe.name}", f"probe failed: {type(exc).__name__}: {exc}")
            continue
        if applies:
            active.append(probe)
        else:
            _skip(facts, probe.name, ctx)
    if not active:
        return facts
    started = time.monotonic()
    runs = [_ProbeRun(probe, ctx, progress) for probe in active]
    for run in runs:
        if progress:
            progress("start", run.probe.name)
        run.thread.start()
    for run in runs:
        name = run.probe.name
        run.thread.join(max(_deadline(run.probe, ctx) - (time.monotonic() - started), 0.1))
        if run.thread.is_alive():  # abandoned: daemon threads never keep the doctor alive
            facts.set(f"probe.{name}.status", "timeout")
            facts.mark_unknown(name, f"the {name} probe did not finish in time")
        elif run.error is not None:
            facts.set(f"probe.{name}.status", "error")
            facts.mark_unknown(name, f"the {name} probe failed: {run.error}")
        elif run.result is not None:
            facts.merge(run.result)
            facts.set(f"probe.{name}.status", "ok")
        facts.set(f"probe.{name}.seconds", run.seconds)  # None: still running when abandoned
        if progress and run.thread.is_alive():  # abandoned: it will never say it is done
            progress("done", name)
    return facts


def gather(ctx: ProbeContext, probes: Sequence[Probe] | None = None, progress: Progress | None = None) -> Facts:
    facts = Facts()
    if probes is not None:
        phases = [list(probes)]
    else:
        # phase 2 probes load the GPU: one at a time, so that none measures another's work
        phases = [default_probes(PHASE_1, ctx), *([p] for p in default_probes(PHASE_2, ctx))]
        if ctx.fast:
            for name in PROBES:
                if not runs_fast(name, ctx.images):
                    _skip(facts, name, ctx)
    with ctx.handoff.open():  # a child left for a later phase is stopped when the phases end
        for phase in phases:
            facts.merge(collect(ctx, phase, progress))
    return facts


# -- judging --------------------------------------------------------------------------------------


def judge_facts(
    facts: Facts,
    config: Config,
    *,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    rules: Sequence[Rule] | None = None,
) -> tuple[list[Result], list[str]]:
    """Derive, then judge.  Returns the results and any internal problems met on the way."""
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
    loaded: list[Rule] = []
    failure: list[Exception] = []

    def load() -> None:
        try:
            loaded.extend(load_rules(config.rules_dirs))
        except Exception as exc:  # re-raised below, in the caller's thread
            failure.append(exc)

    loader = threading.Thread(target=load, name="load-rules", daemon=True)
    loader.start()
    facts = gather(ctx, probes, progress)
    loader.join()
    if failure:
        raise failure[0]
    results, problems = judge_facts(facts, config, select=select, ignore=ignore, rules=loaded)
    return Report(facts=facts, results=results, command=command, problems=problems)


def rejudge(path: Path, config: Config, *, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> Report:
    """Judge the facts of a saved report or facts file again, with this version's rules."""
    from cuda_doctor.reportfile import load_report  # only re-judging reads a saved file

    saved = load_report(path)
    # derived facts are recomputed with this version's tables
    facts = Facts(
        {k: v for k, v in saved.values.items() if not k.startswith("derived.")},
        {k: v for k, v in saved.unknown.items() if not k.startswith("derived.")},
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
        probe = next((p for p, prefixes in PROVIDES.items() if name.startswith(prefixes)), None)
        if facts.has(name) or facts.reason(name) is not None or probe is None:
            return result  # known, or unknown for a reason the report gives
        if facts.get(f"probe.{probe}.status") not in (None, "ok"):
            return result
    return replace(result, status=Status.SKIPPED, message="not in this report: it was saved without these facts")

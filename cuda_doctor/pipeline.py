"""probes → facts → derived facts → rules → results: the one pipeline every command uses."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cuda_doctor import __version__
from cuda_doctor.config import Config
from cuda_doctor.errors import UserError
from cuda_doctor.facts import Facts
from cuda_doctor.knowledge import derive_all
from cuda_doctor.optional import import_optional
from cuda_doctor.probes import PHASE_1, PHASE_2, PROBES, PROVIDES, runs_fast
from cuda_doctor.probes.base import Probe, ProbeContext
from cuda_doctor.results import Result, Severity, Status, exit_code
from cuda_doctor.rules import Judgement, Rule, judge, load_rules
from cuda_doctor.selection import check_selection

SCHEMA = "cuda-doctor/report"
SCHEMA_VERSION = 1

#: Called with ("start" | "done", probe name) so a terminal can show progress.
Progress = Callable[[str, str], None]


class ReportFileError(UserError):
    """A facts or report file that cannot be read; the message names the file."""


@dataclass
class Report:
    facts: Facts
    results: list[Result]
    command: str = "check"
    host: str = field(default_factory=lambda: _hostname())
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()))
    problems: list[str] = field(default_factory=list)  # internal trouble worth showing (never silent)

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for result in self.results:
            counts[result.status.value] += 1
        return counts

    def exit_code(self, fail_on: Severity) -> int:
        return exit_code(self.results, fail_on)

    def to_dict(self, fail_on: Severity = Severity.ERROR) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "cuda-doctor", "version": __version__},
            "host": self.host,
            "created": self.created,
            "command": self.command,
            "facts": self.facts.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "problems": list(self.problems),
            "summary": {**self.counts(), "exit_code": self.exit_code(fail_on), "fail_on": fail_on.value},
        }


def _hostname() -> str:
    return os.uname().nodename  # the same as socket.gethostname(), without importing socket


# -- probing -----------------------------------------------------------------------------------


def load_probe(module_name: str) -> Probe | None:
    module = import_optional(module_name)
    if module is None:
        return None
    probe: Probe = module.PROBE
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
    if ctx.fast:
        why = "--fast"
    elif name in ("smoke", "nccl") and not ctx.smoke:
        why = "--no-smoke"
    else:
        why = "not applicable here"
    facts.set(f"probe.{name}.status", "skipped")
    facts.set(f"probe.{name}.reason", why)


def skipped_by_probe(results: list[Result], facts: Facts) -> list[Result]:
    """A rule left unknown only because its probe did not run is skipped, with the reason."""
    skipped = {
        name: facts.get(f"probe.{name}.reason") or "not run"
        for name in PROVIDES
        if facts.get(f"probe.{name}.status") == "skipped"
    }
    if not skipped:
        return results
    out = []
    for result in results:
        if result.status is Status.UNKNOWN and len(result.evidence) == 1:
            missing = next(iter(result.evidence))
            probe = next((p for p in skipped if missing.startswith(PROVIDES[p])), None)
            if probe is not None:
                result = replace(result, status=Status.SKIPPED, message=f"not checked: {skipped[probe]}")
        out.append(result)
    return out


class _ProbeRun:
    """One probe on its own daemon thread; a probe must never take the doctor down."""

    def __init__(self, probe: Probe, ctx: ProbeContext) -> None:
        self.probe = probe
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
    runs = [_ProbeRun(probe, ctx) for probe in active]
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
        if progress:
            progress("done", name)
    return facts


def gather(
    ctx: ProbeContext,
    probes: Sequence[Probe] | None = None,
    progress: Progress | None = None,
) -> Facts:
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
        select=[*config.select, *select],
        ignore=[*config.ignore, *ignore],
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
    data = read_json(path)
    facts = facts_from_document(data, path)
    # derived facts are recomputed with this version's tables
    facts.values = {k: v for k, v in facts.values.items() if not k.startswith("derived.")}
    facts.unknown = {k: v for k, v in facts.unknown.items() if not k.startswith("derived.")}
    results, problems = judge_facts(facts, config, select=select, ignore=ignore)
    host = data.get("host")
    if not isinstance(host, str):
        host = _hostname()
    return Report(facts=facts, results=results, host=host, problems=problems)


def read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportFileError(f"{path}: cannot read: {exc}") from None
    import json  # only re-judging reads JSON; a plain check never imports it

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFileError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ReportFileError(f"{path}: expected a JSON object")
    return data


def facts_from_document(data: Mapping[str, Any], path: Path) -> Facts:
    """Accept a report (``facts`` inside) or a bare facts object (``values``/``unknown``)."""
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise ReportFileError(
            f"{path}: written by a newer cuda-doctor (schema version {version}; "
            f"this one reads up to {SCHEMA_VERSION}): upgrade cuda-doctor to read it"
        )
    body = data.get("facts", data)
    if not isinstance(body, dict) or "values" not in body:
        raise ReportFileError(f"{path}: no facts found (expected a cuda-doctor report or facts file)")
    try:
        return Facts.from_dict(body)
    except ValueError as exc:
        raise ReportFileError(f"{path}: {exc}") from None

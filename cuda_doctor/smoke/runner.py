"""Run the smoke scripts in children of the target interpreter, under one hard limit: a child
killed at the limit still says which step was running, and keeps the figures of finished GPUs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cuda_doctor.base import children, process
from cuda_doctor.base.childside.script import HANG_VARIABLE as HANG_VARIABLE  # test-only: the child sleeps at that step
from cuda_doctor.base.process import CommandResult
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.probe import TORCH_CHILD

#: Called with ("driver" | "framework", step label) whenever a child starts a step.
ProgressCallback = Callable[[str, str], None]

_HERE = Path(__file__).resolve().parent
_MIN_FRAMEWORK_SECONDS = 1.0
#: Seconds a smoke child that printed its result has to end before its group is killed.
END_GRACE = 10.0
_LIBCUDA_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "usr/local/nvidia/lib64",
    "usr/local/nvidia/lib",
    "usr/lib/wsl/lib",
)


@dataclass(frozen=True)
class ParsedOutput:
    steps: tuple[str, ...] = ()
    devices: tuple[dict[str, Any], ...] = ()
    result: dict[str, Any] | None = None
    truncated: bool = False  # the output ended in the middle of a line


@dataclass(frozen=True)
class ChildRun:
    """What one child process said and how it ended."""

    level: str  # "driver" or "framework"
    parsed: ParsedOutput
    seconds: float
    returncode: int | None = None
    timed_out: bool = False
    stderr_tail: str = ""
    error: str | None = None  # why no result came back (could not start, crashed, killed)
    #: The interpreter never ran the script (no progress line, no result): nothing was learnt.
    interpreter_failed: bool = False
    stdout_head: str = ""

    @property
    def last_step(self) -> str | None:
        return self.parsed.steps[-1] if self.parsed.steps else None

    @property
    def result(self) -> dict[str, Any] | None:
        return self.parsed.result


@dataclass(frozen=True)
class SmokeRun:
    limit: float
    driver: ChildRun
    framework: ChildRun | None = None
    framework_skipped: str | None = None  # why the framework level did not run
    seconds: float = 0.0


def parse_output(text: str) -> ParsedOutput:
    """Progress lines, per-GPU records and the result; ``truncated``: the last line was cut off mid-write."""
    truncated = bool(text.rsplit("\n", 1)[-1].strip())
    return replace(parse_records(children.parse_records(text)), truncated=truncated)


def parse_records(records: Iterable[dict[str, Any]]) -> ParsedOutput:
    steps: list[str] = []
    devices: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    for record in records:
        if isinstance(record.get("step"), str):
            steps.append(record["step"])
        elif isinstance(record.get("device"), dict):
            devices.append(record["device"])
        elif is_result(record):
            result = record["result"]
    return ParsedOutput(tuple(steps), tuple(devices), result)


def is_result(record: dict[str, Any]) -> bool:
    return isinstance(record.get("result"), dict)


def result_run(level: str, child: children.Child) -> ChildRun | None:
    """The run read from ``child``'s records once its result is in, without waiting for its end; else None."""
    if child.wait_for(is_result) is None:
        return None
    return ChildRun(level, parse_records(child.records()), 0.0)


def script_source(level: str) -> str:
    """The whole source of a level's script: the file composed with its child-side modules."""
    return children.compose(_HERE / f"{level}_level.py")


def child_run(
    level: str,
    result: CommandResult,
    limit: float,
    python: str,
    start_limit: float | None = None,
    script: str = "the smoke script",
) -> ChildRun:
    """What one child said, judged: ``limit`` is the time it had, as messages name it."""
    if result.returncode is None and not result.timed_out:
        error = f"the interpreter {python} could not run {script}: {result.error}"
        return ChildRun(level, ParsedOutput(), 0.0, error=error, interpreter_failed=True)
    run = ChildRun(
        level,
        parse_output(result.stdout),
        result.seconds,
        result.returncode,
        result.timed_out,
        result.stderr[-2000:],
        stdout_head=result.stdout[:200],
    )
    return _with_error(run, limit, python, start_limit, script)


def _stderr_detail(stderr_tail: str, lines: int = 1) -> str:
    last = [children.excerpt(line) for line in stderr_tail.splitlines() if line.strip()]
    return " | ".join(last[-lines:])


def _interpreter_error(run: ChildRun, limit: float, python: str, script: str) -> str:
    what = f"the interpreter {python} could not run {script}"
    if run.timed_out:
        return f"{what}: it printed nothing in {limit:g} s and was killed"
    shown = run.stdout_head.strip()
    said = f", printing {shown[:80]!r}" if shown else ""
    detail = _stderr_detail(run.stderr_tail, 3)
    stderr = f"; stderr: {detail}" if detail else ""
    return f"{what}: it exited with status {run.returncode} before any progress line{said}{stderr}"


def _with_error(
    run: ChildRun,
    limit: float,
    python: str = "python",
    start_limit: float | None = None,
    script: str = "the smoke script",
) -> ChildRun:
    step = run.last_step
    if not run.parsed.steps and run.result is None:  # not one line of our protocol: the script never ran
        error = _interpreter_error(run, limit if start_limit is None else start_limit, python, script)
        return replace(run, error=error, interpreter_failed=True)
    if run.timed_out:
        where = f"while running: {step}" if step else "before it reported a step"
        return replace(run, error=f"killed after {limit:g} s {where}")
    if run.result is not None:
        return run
    last = _stderr_detail(run.stderr_tail)
    detail = f": {last}" if last else ""
    where = f" while running: {step}" if step else ""
    return replace(run, error=f"the {run.level}-level smoke child exited with status {run.returncode}{where}{detail}")


def library_candidates(ctx: ProbeContext) -> tuple[list[str], bool]:
    """Where to look for libcuda.so.1, and whether the loader's default search may be used: on the
    live system (root ``/``) the loader knows best; for another root only files inside it count."""
    if ctx.root == Path("/"):
        return [], True
    dirs = [d for d in ctx.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [f"/{d}" for d in _LIBCUDA_DIRS]
    return [str(ctx.file(f"{d.rstrip('/')}/libcuda.so.1")) for d in dirs], False


def run_smoke(ctx: ProbeContext, progress: ProgressCallback | None = None) -> SmokeRun:
    """Both levels within ``ctx.smoke_timeout`` s; the framework level starts once the driver level found libcuda."""
    limit = float(ctx.smoke_timeout)
    start = time.monotonic()
    torch = ctx.handoff.take(TORCH_CHILD)
    if torch is not None and torch.result is not None and not torch.started:
        return _not_started(ctx, torch, limit)
    first = children.start_timeout(ctx.timeout, limit)
    candidates, search_default = library_candidates(ctx)
    config = json.dumps({"candidates": candidates, "search_default": search_default})
    found_driver = threading.Event()
    runs: dict[str, ChildRun] = {}

    def on_driver_step(step: str) -> None:
        if step == "cuInit":
            found_driver.set()
        if progress is not None:
            progress("driver", step)

    def driver_level() -> None:
        source = script_source("driver")
        result = children.run(
            ctx.python, source, [config], env=ctx.env, timeout=limit, start_timeout=first, on_step=on_driver_step
        )
        runs["driver"] = child_run("driver", result, limit, ctx.python, first)
        found_driver.set()

    thread = threading.Thread(target=driver_level, name="smoke-driver", daemon=True)
    thread.start()
    found_driver.wait(timeout=limit + 10)
    left = limit - (time.monotonic() - start)
    skipped = _why_no_framework_level(runs.get("driver"), ctx.python, limit, left)
    framework: ChildRun | None = None
    if skipped is None:
        framework = _framework_level(ctx, torch, left, limit, first, progress)
    elif torch is not None:
        torch.stop()
    thread.join(timeout=max(limit - (time.monotonic() - start), 0.0) + 10)
    driver = runs.get("driver") or ChildRun(
        "driver", ParsedOutput(), time.monotonic() - start, error="the driver-level child did not finish"
    )
    return SmokeRun(limit, driver, framework, skipped, time.monotonic() - start)


def _why_no_framework_level(driver: ChildRun | None, python: str, limit: float, left: float) -> str | None:
    if driver is not None and (driver.result or {}).get("status") == "no_driver":
        return "no NVIDIA driver to run on (libcuda.so.1 not found)"
    if driver is not None and driver.interpreter_failed:
        return f"the interpreter {python} could not run the smoke script"
    if (driver is not None and driver.timed_out) or left < _MIN_FRAMEWORK_SECONDS:
        return f"no time left of the {limit:g} s smoke limit"
    return None


def _framework_level(
    ctx: ProbeContext,
    torch: children.Child | None,
    left: float,
    limit: float,
    first: float,
    progress: ProgressCallback | None,
) -> ChildRun:
    """In the framework probe's torch child (or what it said, if it ended early), else in a child of its own."""

    def on_step(step: str) -> None:
        if progress is not None:
            progress("framework", step)

    # the driver-level child may still hold its context: the GPU's other processes exclude it
    config = json.dumps({"size": 4096, "ours": process.running_pids()})
    if torch is None:
        source = script_source("framework")
        result = children.run(
            ctx.python, source, [config], env=ctx.env, timeout=left, start_timeout=min(first, left), on_step=on_step
        )
        return child_run("framework", result, limit, ctx.python, first)
    if torch.result is not None:  # it ended in the framework probe (a hang or a crash at the import)
        return child_run("framework", torch.result, torch.limit, ctx.python)
    sent = time.monotonic()
    torch.on_step = on_step
    torch.give_more_time(left)
    torch.send({"run": script_source("framework"), "argv": [config]})
    run = result_run("framework", torch)
    if run is None:
        run = child_run("framework", torch.finish(), limit, ctx.python)
    else:  # its context torn down while the next probe runs
        ctx.handoff.let_end(torch, END_GRACE)
    return replace(run, seconds=time.monotonic() - sent)


def _not_started(ctx: ProbeContext, torch: children.Child, limit: float) -> SmokeRun:
    """The interpreter could not start the framework probe: a smoke run would only repeat that."""
    assert torch.result is not None
    failed = child_run("driver", torch.result, limit, ctx.python, torch.start_limit, "the framework probe")
    error = f"{failed.error}; the smoke run was skipped"
    return SmokeRun(limit, replace(failed, seconds=0.0, error=error), None, error, 0.0)

"""Run the smoke scripts in children of the target interpreter, under one hard limit: a child
killed at the limit still says which step was running, and keeps the figures of finished GPUs."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cuda_doctor.base import children, process
from cuda_doctor.base.childside.script import HANG_VARIABLE as HANG_VARIABLE  # test-only: the child sleeps at that step
from cuda_doctor.base.process import CommandResult
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.compile.probe import COMPILE_CHILD, start_smoke_child
from cuda_doctor.framework.probe import TORCH_CHILD, is_payload

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
    #: ``{"step": …, "error": …}`` of each step that failed, said as it failed (before any crash).
    failures: tuple[dict[str, Any], ...] = ()


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
    compiled: ChildRun | None = None  # the compile level: a Triton kernel and torch.compile per GPU
    compile_skipped: str | None = None  # why the compile level did not run


def parse_output(text: str) -> ParsedOutput:
    """Progress lines, per-GPU records and the result; ``truncated``: the last line was cut off mid-write."""
    truncated = bool(text.rsplit("\n", 1)[-1].strip())
    return replace(parse_records(children.parse_records(text)), truncated=truncated)


def parse_records(records: Iterable[dict[str, Any]]) -> ParsedOutput:
    steps: list[str] = []
    devices: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    for record in records:
        if isinstance(record.get("step"), str):
            steps.append(record["step"])
        elif isinstance(record.get("device"), dict):
            devices.append(record["device"])
        elif isinstance(record.get("failure"), dict):
            failures.append(record["failure"])
        elif is_result(record):
            result = record["result"]
    return ParsedOutput(tuple(steps), tuple(devices), result, failures=tuple(failures))


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
    ended = f"the {run.level}-level smoke child {exit_words(run.returncode)}{where}"
    if run.parsed.failures:  # what failed first is the cause; the crash came after it
        first = run.parsed.failures[0]
        return replace(run, error=f"{first.get('step')} failed: {first.get('error')} (then {ended}{detail})")
    return replace(run, error=f"{ended}{detail}")


def exit_words(returncode: int | None) -> str:
    """``exited with status 3``, ``was killed by signal SIGSEGV (status -11)``."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"was killed by signal {name} (status {returncode})"
    return f"exited with status {returncode}"


def library_candidates(ctx: ProbeContext) -> tuple[list[str], bool]:
    """Where to look for libcuda.so.1, and whether the loader's default search may be used: on the
    live system (root ``/``) the loader knows best; for another root only files inside it count."""
    if ctx.root == Path("/"):
        return [], True
    dirs = [d for d in ctx.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [f"/{d}" for d in _LIBCUDA_DIRS]
    return [str(ctx.file(f"{d.rstrip('/')}/libcuda.so.1")) for d in dirs], False


def run_smoke(ctx: ProbeContext, progress: ProgressCallback | None = None) -> SmokeRun:
    """The three levels within ``ctx.smoke_timeout`` s: the framework level starts once the driver
    level found libcuda; the compile level gets the GPUs once the framework level is done."""
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
    compiler = ctx.handoff.take(COMPILE_CHILD)  # left by the compile probe, importing since phase 1
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
    left = limit - (time.monotonic() - start)
    compile_skipped = skipped or _why_no_compile_level(framework, limit, left)
    compiled: ChildRun | None = None
    if compile_skipped is None:
        compiler = compiler or start_smoke_child(ctx, left)
        if compiler is None:
            compile_skipped = "cannot read the compile level's source"
        else:
            compiled = _compile_level(ctx, compiler, left, limit, progress)
    elif compiler is not None:
        compiler.stop()
    run = SmokeRun(limit, driver, framework, skipped, time.monotonic() - start)
    return replace(run, compiled=compiled, compile_skipped=compile_skipped)


def _why_no_compile_level(framework: ChildRun | None, limit: float, left: float) -> str | None:
    result = framework.result if framework is not None else None
    if result is None:
        return "the framework level gave no result"
    if result.get("status") == "no_torch":
        return "torch is not installed"
    if not result.get("cuda_available") or not result.get("device_count"):
        return "torch found no GPU to compile for"
    if left < _MIN_FRAMEWORK_SECONDS:
        return f"no time left of the {limit:g} s smoke limit"
    return None


def _compile_level(
    ctx: ProbeContext, child: children.Child, left: float, limit: float, progress: ProgressCallback | None
) -> ChildRun:
    """Hand the GPUs to the compile-level child and read what it compiled within ``left`` s."""

    def on_step(step: str) -> None:
        if progress is not None:
            progress("compile", step)

    sent = time.monotonic()
    child.on_step = on_step
    child.give_more_time(left)
    if child.wait_for(lambda record: record.get("ready") is True) is not None:
        child.send({"go": True})
    run = result_run("compile", child)
    if run is None:
        run = child_run("compile", child.finish(), limit, ctx.python, script="the compile-level smoke script")
    else:  # Inductor's worker processes and the interpreter's teardown end while the check goes on
        ctx.handoff.let_end(child, END_GRACE)
    return replace(run, seconds=time.monotonic() - sent)


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
    settings: dict[str, Any] = {"size": 4096, "ours": process.running_pids()}
    config = json.dumps(settings)
    if torch is None:
        source = script_source("framework")
        result = children.run(
            ctx.python, source, [config], env=ctx.env, timeout=left, start_timeout=min(first, left), on_step=on_step
        )
        return child_run("framework", result, limit, ctx.python, first)
    if torch.result is not None:  # it ended in the framework probe (a hang or a crash at the import)
        return child_run("framework", torch.result, torch.limit, ctx.python)
    earlier = cuda_start_error(torch.seen(is_payload))
    if earlier is not None:
        config = json.dumps({**settings, "cuda_start_error": earlier})
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


def cuda_start_error(payload: Mapping[str, Any] | None) -> str | None:
    """How CUDA failed to start in the framework probe's child, which the smoke script must not
    start again (a second start after a failed one can crash the process); None if it did not fail."""
    if payload is None:
        return None
    values, unknown = payload.get("values"), payload.get("unknown")
    if not isinstance(values, dict) or not isinstance(unknown, dict) or not values.get("torch.device_count"):
        return None
    reason = unknown.get("torch.device_capabilities")  # asking for them starts CUDA
    return reason if isinstance(reason, str) else None


def _not_started(ctx: ProbeContext, torch: children.Child, limit: float) -> SmokeRun:
    """The interpreter could not start the framework probe: a smoke run would only repeat that."""
    assert torch.result is not None
    failed = child_run("driver", torch.result, limit, ctx.python, torch.start_limit, "the framework probe")
    error = f"{failed.error}; the smoke run was skipped"
    return SmokeRun(limit, replace(failed, seconds=0.0, error=error), None, error, 0.0)

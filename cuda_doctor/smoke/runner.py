"""Run the smoke scripts in child processes of the target interpreter, under one hard limit.

The children print a JSON line ``{"step": …}`` before each step, ``{"device": {…}}`` after
each GPU (framework level) and ``{"result": {…}}`` at the end.  Lines are read as they come,
so when the limit is reached the child's whole process group is killed and the outcome
still says which step was running ("killed after 30 s while running: matmul bf16 on GPU 0")
and keeps the figures of the GPUs that finished.

``run_command`` collects output only at the end, so this module streams with its own
``Popen`` under the same rules: a new session, the group killed on timeout, never raising.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.process import start_streaming, wait_or_kill

#: Called with ("driver" | "framework", step label) whenever a child starts a step.
ProgressCallback = Callable[[str, str], None]

HANG_VARIABLE = "CUDA_DOCTOR_SMOKE_TEST_HANG"  # test-only: the child sleeps at that step
_HERE = Path(__file__).resolve().parent
_MIN_FRAMEWORK_SECONDS = 1.0
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
    #: The interpreter never ran the script: it printed no progress line and no result
    #: (not a Python, a wrapper that exits, a hang before the first line).  Nothing was
    #: learnt about the driver or the GPU then.
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
    """Read progress lines, per-GPU records and the final result; ignore anything else.

    A last line without its newline was cut off (the child was killed mid-write) and is
    dropped rather than guessed at.
    """
    lines = text.split("\n")
    truncated = bool(lines and lines[-1].strip())
    steps: list[str] = []
    devices: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    for line in lines[:-1]:
        record = _record(line)
        if record is None:
            continue
        if isinstance(record.get("step"), str):
            steps.append(record["step"])
        elif isinstance(record.get("device"), dict):
            devices.append(record["device"])
        elif isinstance(record.get("result"), dict):
            result = record["result"]
    return ParsedOutput(tuple(steps), tuple(devices), result, truncated)


def _record(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None  # a library's own print, not ours
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def script_source(level: str) -> str:
    return (_HERE / f"{level}_level.py").read_text(encoding="utf-8")


def run_child(
    level: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    limit_for_message: float,
    on_step: ProgressCallback | None = None,
) -> ChildRun:
    """Start ``argv``, stream its stdout, kill its process group after ``timeout`` seconds."""
    start = time.monotonic()
    proc = start_streaming(argv, env)
    if isinstance(proc, str):
        error = f"the interpreter {argv[0]} could not run the smoke script: {proc}"
        return ChildRun(level, ParsedOutput(), 0.0, error=error, interpreter_failed=True)
    out_chunks: list[str] = []
    err_chunks: list[str] = []

    def read_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out_chunks.append(line)
            record = _record(line) if line.endswith("\n") else None
            if on_step is not None and record is not None and isinstance(record.get("step"), str):
                on_step(level, record["step"])

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_chunks.append(line)
            if len(err_chunks) > 200:
                del err_chunks[:100]

    readers = [threading.Thread(target=f, daemon=True) for f in (read_stdout, read_stderr)]
    for reader in readers:
        reader.start()
    timed_out, survived = wait_or_kill(proc, timeout)
    if survived:  # stuck in the kernel driver (state D): say so; the readers are daemon threads
        err_chunks.append("the child did not exit after SIGKILL (stuck in the driver?)\n")
    for reader in readers:
        reader.join(timeout=2)
    seconds = time.monotonic() - start
    parsed = parse_output("".join(out_chunks))
    stderr_tail = "".join(err_chunks)[-2000:]
    head = "".join(out_chunks)[:200]
    run = ChildRun(level, parsed, seconds, proc.returncode, timed_out, stderr_tail, stdout_head=head)
    return _with_error(run, limit_for_message, argv[0])


def _stderr_detail(stderr_tail: str, lines: int = 1) -> str:
    last = [line.strip() for line in stderr_tail.splitlines() if line.strip()]
    return " | ".join(last[-lines:])


def _interpreter_error(run: ChildRun, limit: float, python: str) -> str:
    what = f"the interpreter {python} could not run the smoke script"
    if run.timed_out:
        return f"{what}: it printed nothing in {limit:g} s and was killed"
    shown = run.stdout_head.strip()
    said = f", printing {shown[:80]!r}" if shown else ""
    detail = _stderr_detail(run.stderr_tail, 3)
    stderr = f"; stderr: {detail}" if detail else ""
    return f"{what}: it exited with status {run.returncode} before any progress line{said}{stderr}"


def _with_error(run: ChildRun, limit: float, python: str = "python") -> ChildRun:
    step = run.last_step
    if not run.parsed.steps and run.result is None:
        # Not one line of our protocol: the script never ran, so the driver is not in question.
        return replace(run, error=_interpreter_error(run, limit, python), interpreter_failed=True)
    if run.timed_out:
        where = f"while running: {step}" if step else "before it reported a step"
        error = f"killed after {limit:g} s {where}"
    elif run.result is not None:
        return run
    else:
        last = _stderr_detail(run.stderr_tail)
        detail = f": {last}" if last else ""
        where = f" while running: {step}" if step else ""
        error = f"the {run.level}-level smoke child exited with status {run.returncode}{where}{detail}"
    return replace(run, error=error)


def library_candidates(ctx: ProbeContext) -> tuple[list[str], bool]:
    """Where to look for libcuda.so.1, and whether the loader's default search may be used.

    On the live system (root ``/``) the dynamic loader knows best (LD_LIBRARY_PATH, ld.so
    cache).  For another root only files inside it count: the host's driver says nothing
    about it.
    """
    if ctx.root == Path("/"):
        return [], True
    dirs = [d for d in ctx.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [f"/{d}" for d in _LIBCUDA_DIRS]
    return [str(ctx.file(f"{d.rstrip('/')}/libcuda.so.1")) for d in dirs], False


def run_smoke(ctx: ProbeContext, progress: ProgressCallback | None = None) -> SmokeRun:
    """Both levels within ``ctx.smoke_timeout`` seconds in total.

    The framework level starts as soon as the driver level has found libcuda (its "cuInit"
    step), so the two run side by side; with no driver at all, torch is never imported.
    """
    limit = float(ctx.smoke_timeout)
    start = time.monotonic()
    candidates, search_default = library_candidates(ctx)
    config = json.dumps({"candidates": candidates, "search_default": search_default})
    env = dict(ctx.env)
    found_driver = threading.Event()
    runs: dict[str, ChildRun] = {}

    def on_driver_step(level: str, step: str) -> None:
        if step == "cuInit":
            found_driver.set()
        if progress is not None:
            progress(level, step)

    def driver_level() -> None:
        runs["driver"] = run_child(
            "driver",
            [ctx.python, "-c", script_source("driver"), config],
            env=env,
            timeout=limit,
            limit_for_message=limit,
            on_step=on_driver_step,
        )
        found_driver.set()

    thread = threading.Thread(target=driver_level, name="smoke-driver", daemon=True)
    thread.start()
    found_driver.wait(timeout=limit + 10)
    framework: ChildRun | None = None
    skipped: str | None = None
    finished = runs.get("driver")
    left = limit - (time.monotonic() - start)
    if finished is not None and (finished.result or {}).get("status") == "no_driver":
        skipped = "no NVIDIA driver to run on (libcuda.so.1 not found)"
    elif finished is not None and finished.interpreter_failed:
        skipped = f"the interpreter {ctx.python} could not run the smoke script"
    elif (finished is not None and finished.timed_out) or left < _MIN_FRAMEWORK_SECONDS:
        skipped = f"no time left of the {limit:g} s smoke limit"
    else:
        framework = run_child(
            "framework",
            [ctx.python, "-c", script_source("framework"), json.dumps({"size": 4096})],
            env=env,
            timeout=left,
            limit_for_message=limit,
            on_step=progress,
        )
    thread.join(timeout=max(limit - (time.monotonic() - start), 0.0) + 10)
    driver = runs.get("driver") or ChildRun(
        "driver", ParsedOutput(), time.monotonic() - start, error="the driver-level child did not finish"
    )
    return SmokeRun(limit, driver, framework, skipped, time.monotonic() - start)

"""What the deep-learning frameworks of the *target* interpreter see.

torch (and TensorFlow, when installed) are imported in a subprocess of ``ctx.python``:
the interpreter being judged may not be ours, importing torch here would make it a
dependency, and a framework that hangs or crashes must not take the doctor with it.  The
child (``_framework_child.py``) prints one JSON object; anything else — a missing
interpreter, a crash, a hang, garbage on stdout — makes every framework fact unknown, with
the reason.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.facts import Facts
from cuda_doctor.probes._framework_child import STARTED, TENSORFLOW_FACTS, TORCH_FACTS
from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.process import CommandResult, start_streaming, wait_or_kill

CHILD_SCRIPT = Path(__file__).with_name("_framework_child.py")

#: Every fact this probe is responsible for; each ends up known or unknown.  The child script
#: (self-contained: it runs in the target interpreter) names the torch and TensorFlow ones.
FRAMEWORK_FACTS: tuple[str, ...] = (
    "framework.python",
    "framework.python_version",
    "torch.installed",
    *TORCH_FACTS,
    "tensorflow.installed",
    *TENSORFLOW_FACTS,
)

_PREFIXES = ("framework.", "torch.", "tensorflow.")

#: ``import torch`` alone takes 5-7 s cold on a GPU machine, TensorFlow longer; a general
#: probe timeout of a few seconds would report a healthy install as hung.
DEFAULT_MIN_TIMEOUT = 60.0
#: The child prints its "started" line before importing anything heavy, so an interpreter
#: that does not start at all is given up on after max(--timeout, this), not after a minute.
DEFAULT_MIN_START_TIMEOUT = 5.0


@dataclass
class FrameworkProbe:
    name: str = "framework"
    min_timeout: float = DEFAULT_MIN_TIMEOUT
    min_start_timeout: float = DEFAULT_MIN_START_TIMEOUT

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast  # --fast promises no framework import

    def timeout(self, ctx: ProbeContext) -> float:
        return max(ctx.timeout, self.min_timeout)

    def start_timeout(self, ctx: ProbeContext) -> float:
        return min(max(ctx.timeout, self.min_start_timeout), self.timeout(ctx))

    def deadline(self, ctx: ProbeContext) -> float:
        return self.timeout(ctx) + 30  # the child's limit, then killing it and reading its output

    def collect(self, ctx: ProbeContext) -> Facts:
        try:
            source = CHILD_SCRIPT.read_text(encoding="utf-8")
        except OSError as exc:
            return all_unknown(f"cannot read {CHILD_SCRIPT}: {exc.strerror or exc}")
        timeout = self.timeout(ctx)
        start_timeout = self.start_timeout(ctx)
        # ``-c`` rather than the script's path: running a file puts its folder first on
        # sys.path, and our sibling modules would shadow the user's packages.
        result = run_child([ctx.python, "-c", source], ctx.env, start_timeout, timeout)
        return interpret(result, ctx.python, timeout, start_timeout)


def run_child(argv: Sequence[str], env: Mapping[str, str], start_timeout: float, timeout: float) -> CommandResult:
    """Run the child in two stages: its "started" line within ``start_timeout``, its answer
    within ``timeout`` in all.  A timed-out result whose stdout lacks the "started" line is an
    interpreter that never started.  The process group is killed on either limit; never raises.
    """
    args = tuple(argv)
    start = time.monotonic()
    proc = start_streaming(args, env)
    if isinstance(proc, str):
        return CommandResult(args, None, "", "", 0.0, f"{args[0]}: {proc}")
    out: list[str] = []
    err: list[str] = []
    started = threading.Event()

    def read_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if line.strip() == STARTED:
                started.set()
        started.set()  # end of output: nothing more to wait for before the process exits

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)

    readers = [threading.Thread(target=f, daemon=True) for f in (read_stdout, read_stderr)]
    for reader in readers:
        reader.start()
    started.wait(timeout=start_timeout)
    limit = timeout if STARTED + "\n" in out else start_timeout
    left = limit - (time.monotonic() - start)
    timed_out, survived = wait_or_kill(proc, left)
    if survived:
        err.append("the child did not exit after SIGKILL\n")
    for reader in readers:
        reader.join(timeout=2)
    seconds = time.monotonic() - start
    return CommandResult(
        args,
        None if timed_out else proc.returncode,
        "".join(out),
        "".join(err),
        seconds,
        "timed out" if timed_out else None,
        timed_out=timed_out,
    )


def interpret(result: CommandResult, python: str, timeout: float, start_timeout: float | None = None) -> Facts:
    """Turn the child's run into facts, or into one reason why there are none."""
    if result.timed_out:
        began = any(line.strip() == STARTED for line in result.stdout.splitlines())
        if start_timeout is not None and not began:
            return all_unknown(
                f"{python} did not start the framework probe within {start_timeout:g} s"
                " (it printed nothing; is it a working Python?)"
            )
        return all_unknown(f"{python} did not answer in {timeout:g} s")
    if result.returncode is None:
        return all_unknown(f"could not run {python}: {result.error}")
    payload = find_payload(result.stdout)
    if payload is None:
        if result.returncode != 0:
            status = _status(result.returncode)
            return all_unknown(f"{python} exited with {status}{_last_line(result)}")
        shown = _without_started(result.stdout).strip()[:200]
        return all_unknown(f"{python} printed no JSON report" + (f": {shown!r}" if shown else " (empty output)"))
    return shape(payload, python)


def find_payload(stdout: str) -> dict[str, Any] | None:
    """The child's JSON object: the last stdout line that parses as one."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and set(data) != {"started"}:
            return data
    return None


def shape(payload: dict[str, Any], python: str) -> Facts:
    """Keep the framework facts of the child's report; say why any expected one is missing."""
    facts = Facts()
    values = payload.get("values")
    unknown = payload.get("unknown")
    if not isinstance(values, dict) or not isinstance(unknown, dict):
        return all_unknown(f"{python} printed a report without 'values' and 'unknown' objects")
    for name, value in values.items():
        if isinstance(name, str) and name.startswith(_PREFIXES):
            facts.set(name, value)
    for name, reason in unknown.items():
        if isinstance(name, str) and name.startswith(_PREFIXES):
            facts.mark_unknown(name, str(reason))
    for name in FRAMEWORK_FACTS:
        if name not in facts.values and name not in facts.unknown:
            facts.mark_unknown(name, f"{python} did not report it")
    return facts


def all_unknown(reason: str) -> Facts:
    facts = Facts()
    for name in FRAMEWORK_FACTS:
        facts.mark_unknown(name, reason)
    return facts


def _status(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"


def _last_line(result: CommandResult) -> str:
    lines = (result.stderr.strip() or _without_started(result.stdout).strip()).splitlines()
    return f": {lines[-1].strip()}" if lines else ""


def _without_started(stdout: str) -> str:
    return "\n".join(line for line in stdout.splitlines() if line.strip() != STARTED)


PROBE = FrameworkProbe()

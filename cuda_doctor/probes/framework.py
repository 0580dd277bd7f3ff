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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.facts import Facts
from cuda_doctor.probes._framework_child import TENSORFLOW_FACTS, TORCH_FACTS
from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.process import CommandResult, run_command

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


@dataclass
class FrameworkProbe:
    name: str = "framework"
    min_timeout: float = DEFAULT_MIN_TIMEOUT

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast  # --fast promises no framework import

    def timeout(self, ctx: ProbeContext) -> float:
        return max(ctx.timeout, self.min_timeout)

    def collect(self, ctx: ProbeContext) -> Facts:
        try:
            source = CHILD_SCRIPT.read_text(encoding="utf-8")
        except OSError as exc:
            return all_unknown(f"cannot read {CHILD_SCRIPT}: {exc.strerror or exc}")
        timeout = self.timeout(ctx)
        # ``-c`` rather than the script's path: running a file puts its folder first on
        # sys.path, and our sibling modules would shadow the user's packages.
        result = run_command([ctx.python, "-c", source], timeout=timeout, env=ctx.env)
        return interpret(result, ctx.python, timeout)


def interpret(result: CommandResult, python: str, timeout: float) -> Facts:
    """Turn the child's run into facts, or into one reason why there are none."""
    if result.timed_out:
        return all_unknown(f"{python} did not answer in {timeout:g} s")
    if result.returncode is None:
        return all_unknown(f"could not run {python}: {result.error}")
    payload = find_payload(result.stdout)
    if payload is None:
        if result.returncode != 0:
            status = _status(result.returncode)
            return all_unknown(f"{python} exited with {status}{_last_line(result)}")
        shown = result.stdout.strip()[:200]
        return all_unknown(
            f"{python} printed no JSON report" + (f": {shown!r}" if shown else " (empty output)")
        )
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
        if isinstance(data, dict):
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
    lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return f": {lines[-1].strip()}" if lines else ""


PROBE = FrameworkProbe()

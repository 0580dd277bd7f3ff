"""The fast check as Slurm's health check and prolog: run it, then drain or undrain the node.  The
check is a child killed at a budget (a wedged driver holds up slurmd no longer); its exit status is
the verdict, its one line the drain reason."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cuda_doctor.base.process import run_command
from cuda_doctor.report.check.oneline import LIMIT, clean
from cuda_doctor.slurm.node import REASON_PREFIX, NodeState, Slurm

VERDICTS = {0: "OK", 1: "FAIL"}
#: The rules about the node itself: a hook's own environment and /dev/shm say nothing about the jobs'.
NODE_RULES = ("driver", "gpu", "health")


@dataclass(frozen=True)
class Outcome:
    verdict: str  # OK | FAIL | UNKNOWN
    line: str  # the check's one line (or why there is none), printable ASCII


@dataclass(frozen=True)
class Action:
    kind: str  # drain | undrain | none
    why: str
    reason: str = ""  # the drain reason, for kind == "drain"


def node_name(given: str | None, env: Mapping[str, str]) -> str:
    """--node, else the name slurmd runs its programs with, else the short host name."""
    return given or env.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]


def run_check(check_args: Sequence[str], budget: float, env: Mapping[str, str] | None = None) -> Outcome:
    """``cuda-doctor check --fast --format oneline CHECK_ARGS`` in a child, killed after ``budget`` s."""
    argv = [sys.executable, "-m", "cuda_doctor", "check", "--fast", "--format", "oneline", *check_args]
    res = run_command(argv, timeout=budget, env=env)
    if res.timed_out:
        return Outcome("UNKNOWN", f"UNKNOWN cuda-doctor check did not finish in {budget:g} s")
    if res.returncode is None:  # it could not be started
        return Outcome("UNKNOWN", clean(f"UNKNOWN cuda-doctor check could not run: {res.error}")[:LIMIT])
    lines = res.stdout.strip().splitlines()
    line = clean(lines[0])[:LIMIT] if lines else ""
    verdict = VERDICTS.get(res.returncode, "UNKNOWN")
    if verdict == "UNKNOWN" and not line.startswith("UNKNOWN"):
        said = (res.stderr.strip().splitlines() or ["no message"])[-1]  # a usage error, a crash
        line = clean(f"UNKNOWN cuda-doctor check exited with status {res.returncode}: {said}")[:LIMIT]
    elif not line:
        line = f"{verdict} (cuda-doctor check printed nothing)"
    return Outcome(verdict, line)


def decide(outcome: Outcome, node: NodeState) -> Action:
    """FAIL drains, unless another reason's drain is there (never taken over); OK undrains only
    cuda-doctor's drain; no verdict leaves the node as it is."""
    other = clean(f"drained for another reason ({node.reason or 'none given'}): left alone")
    if outcome.verdict == "FAIL":
        if node.drained and not node.drained_by_us:
            return Action("none", f"already {other}")
        reason = REASON_PREFIX + outcome.line
        if node.drained and node.reason == reason:
            return Action("none", "already drained for this")
        return Action("drain", "drained", reason)
    if outcome.verdict == "OK":
        if node.drained_by_us:
            return Action("undrain", "undrained (cuda-doctor had drained it)")
        if node.drained:
            return Action("none", other)
        return Action("none", "nothing to do")
    return Action("none", "no verdict: node state left as it is")


def apply(action: Action, node: str, slurm: Slurm) -> str | None:
    """Carry out ``action``; None when done (or nothing to do), else why it failed."""
    if action.kind == "drain":
        return slurm.drain(node, action.reason)
    if action.kind == "undrain":
        return slurm.undrain(node)
    return None

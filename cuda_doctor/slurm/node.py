"""One Slurm node's state, and draining or undraining it, through ``sinfo`` and ``scontrol``; every
call is time-bounded and never raises: a failure comes back as a sentence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cuda_doctor.base.process import run_command

REASON_PREFIX = "cuda-doctor: "  # marks cuda-doctor's own drains: every other one is left alone
#: sinfo marks a state with one of these when the node is not responding, powered down, …
_STATE_FLAGS = "*~#!%$@^-"


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # sinfo's long state, flags stripped: idle, mixed, drained, draining, down …
    reason: str  # "" when the node has none

    @property
    def drained(self) -> bool:
        """Draining (jobs still running) or drained: no new jobs start here."""
        return "drain" in self.state

    @property
    def drained_by_us(self) -> bool:
        return self.drained and self.reason.startswith(REASON_PREFIX)


@dataclass(frozen=True)
class Slurm:
    """The Slurm commands, run with ``env`` (None: this process's) and at most ``timeout`` s each."""

    timeout: float = 5.0
    env: Mapping[str, str] | None = None

    def node(self, name: str) -> NodeState | str:
        """The node's state, or why it could not be read."""
        # one line per partition the node is in; %T first (it never holds a "|"), the reason last
        argv = ["sinfo", "--noheader", "--Node", f"--nodes={name}", "--format=%T|%E"]
        res = run_command(argv, timeout=self.timeout, env=self.env)
        if res.error:
            return f"could not read the state of node {name}: {res.error}"
        line = next((ln for ln in res.stdout.splitlines() if "|" in ln), None)
        if line is None:
            return f"Slurm does not know a node named {name} (set it with --node)"
        state, _, reason = line.partition("|")
        reason = reason.strip()
        return NodeState(name, state.strip().rstrip(_STATE_FLAGS).lower(), "" if reason == "none" else reason)

    def drain(self, name: str, reason: str) -> str | None:
        """Drain the node with ``reason``; None when done, else why not."""
        return self._update(name, "state=drain", f"reason={reason}")

    def undrain(self, name: str) -> str | None:
        """Clear the drain only: unlike resume, UNDRAIN leaves a DOWN node down."""
        return self._update(name, "state=undrain")

    def _update(self, name: str, *settings: str) -> str | None:
        res = run_command(["scontrol", "update", f"nodename={name}", *settings], timeout=self.timeout, env=self.env)
        return f"scontrol update nodename={name} {settings[0]} failed: {res.error}" if res.error else None

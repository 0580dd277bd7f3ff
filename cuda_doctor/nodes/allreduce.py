"""This node's rank of the all-reduce across nodes, as a child of the target interpreter under a
hard deadline (``base.children``); never raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_doctor.base import children

CHILD = Path(__file__).with_name("allreduce_child.py")
#: NVLink SHARP multicast is left as the user's environment says; everything else is the user's too.
DEFAULT_SIZE = 16 << 20


@dataclass(frozen=True)
class RankOutcome:
    status: str  # ok | failed | timeout | stopped (another rank had failed)
    versions: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    joined: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "versions": self.versions, "result": self.result,
            "error": self.error, "joined": self.joined,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankOutcome:
        def table(name: str) -> dict[str, Any]:
            value = data.get(name)
            return dict(value) if isinstance(value, dict) else {}

        error = data.get("error")
        return cls(
            str(data.get("status") or "failed"), table("versions"), table("result"),
            None if error is None else str(error), bool(data.get("joined")),
        )  # fmt: skip


def run_rank(
    python: str,
    env: Mapping[str, str],
    *,
    rank: int,
    world_size: int,
    master: tuple[str, int],
    local_rank: int,
    backend: str,
    timeout: float,
    size: int = DEFAULT_SIZE,
    iters: int = 5,
    cancel: threading.Event | None = None,
) -> RankOutcome:
    """Run this node's rank; kill it at ``timeout`` s, or as soon as ``cancel`` is set (another
    rank failed: this one would only wait for it).  The child reports torch's versions first, so
    that they are known even when the group never forms."""
    try:
        source = children.compose(CHILD)
    except OSError as exc:
        return RankOutcome("failed", error=f"cannot read {CHILD}: {exc.strerror or exc}")
    numbers = {"RANK": rank, "WORLD_SIZE": world_size, "LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": 1}
    # under torchrun, TORCHELASTIC_USE_AGENT_STORE makes rank 0 a client of a store torchrun's agent
    # holds at its own MASTER_PORT: the all-reduce has a store of its own, which rank 0 serves
    inherited = {name: value for name, value in env.items() if not name.startswith("TORCHELASTIC_")}
    child_env = {
        **inherited,
        "MASTER_ADDR": master[0],
        "MASTER_PORT": str(master[1]),
        "PYTHONUNBUFFERED": "1",
        **{name: str(value) for name, value in numbers.items()},
    }
    # torch's own timeout is a backstop only: this deadline decides
    args = ["--backend", backend, "--size", str(size), "--iters", str(iters), "--init-timeout", f"{timeout + 30:g}"]
    child = children.Child(python, source, args, env=child_env, timeout=timeout, start_timeout=timeout)
    until = time.monotonic() + timeout
    while cancel is not None and child.poll() is None and time.monotonic() < until and not cancel.is_set():
        cancel.wait(0.1)
    stopped = cancel is not None and cancel.is_set() and child.poll() is None
    done = child.stop() if stopped else child.finish()
    records = children.parse_records(done.stdout)

    def first(event: str) -> dict[str, Any]:
        found = next((r for r in records if r.get("event") == event), None)
        return {k: v for k, v in found.items() if k != "event"} if found else {}

    versions, result, failure = first("versions"), first("result"), first("error")
    joined = bool(first("joined"))
    if stopped and not result:
        return RankOutcome("stopped", versions, error="stopped: another rank had failed", joined=joined)
    if done.returncode is None and not done.timed_out:
        return RankOutcome("failed", error=f"cannot start {python}: {done.error}")
    if done.timed_out:
        step = "the group formed, the all-reduce did not finish" if joined else "init_process_group did not return"
        return RankOutcome("timeout", versions, error=f"{step} in {timeout:g} s", joined=joined)
    if result:
        return RankOutcome("ok", versions, result, joined=True)
    if versions and versions.get("torch_installed") is False:
        return RankOutcome("failed", versions, error=f"torch cannot be imported: {versions.get('import_error')}")
    error = failure.get("error") or f"exited with status {done.returncode}{children.last_line(done.stderr)}"
    return RankOutcome("failed", versions, error=str(error), joined=joined)

"""Launch one all-reduce rank per GPU under one hard deadline, and read back their results; never raises."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from cuda_doctor.base import children
from cuda_doctor.base.process import CommandResult

CHILD = Path(__file__).with_name("allreduce_child.py")
DEFAULT_SIZES = (1 << 20, 16 << 20, 256 << 20)  # 1 MiB, 16 MiB, 256 MiB


@dataclass(frozen=True)
class GroupResult:
    """What the whole group concluded.  ``status`` is "ok", "failed" or "timeout"."""

    status: str
    error: str | None
    world_size: int
    ranks: tuple[dict[str, Any], ...] = ()  # each rank's "result" object, by rank
    seconds: float = 0.0

    @property
    def sum_ok(self) -> bool | None:
        return all(bool(r.get("sum_ok")) for r in self.ranks) if self.ranks else None

    def busbw_gbps(self) -> dict[str, float]:
        """Bus bandwidth per message size, taken from the slowest rank (the collective's pace)."""
        out: dict[str, float] = {}
        for r in self.ranks:
            for size, row in (r.get("sizes") or {}).items():
                value = float(row["busbw_gbps"])
                out[size] = min(out.get(size, value), value)
        return dict(sorted(out.items(), key=lambda kv: int(kv[0])))

    def rank0(self) -> dict[str, Any]:
        return next((r for r in self.ranks if r.get("rank") == 0), {})


def parse_events(text: str) -> list[dict[str, Any]]:
    """The event records of a rank's stdout; anything else (library chatter) is skipped."""
    return [record for record in children.parse_records(text) if "event" in record]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: NVLink SHARP multicast is off unless the user says otherwise: it uses the NVSwitches all GPUs share.
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def nvls_setting(base: Mapping[str, str]) -> str:
    """The NCCL_NVLS_ENABLE the ranks run with."""
    return base.get("NCCL_NVLS_ENABLE", NVLS_OFF["NCCL_NVLS_ENABLE"])


def child_env(base: Mapping[str, str], rank: int, world_size: int, port: int) -> dict[str, str]:
    numbers = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": world_size, "LOCAL_WORLD_SIZE": world_size}
    rendezvous = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1"}
    return {**NVLS_OFF, **base, **rendezvous, **{name: str(n) for name, n in numbers.items()}}


def run_group(
    python: str,
    world_size: int,
    *,
    backend: str = "nccl",
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    sizes: Sequence[int] = DEFAULT_SIZES,
    iters: int = 20,
    warmup: int = 5,
) -> GroupResult:
    """Run ``world_size`` ranks of ``CHILD`` with ``python``; kill them all at ``timeout``."""
    start = time.monotonic()
    try:
        source = CHILD.read_text(encoding="utf-8")
    except OSError as exc:
        return GroupResult("failed", f"cannot read {CHILD}: {exc.strerror or exc}", world_size)
    base = dict(os.environ if env is None else env)
    port = free_port()
    argv_tail = ["--backend", backend, "--sizes", ",".join(str(s) for s in sizes), "--iters", str(iters)]
    # torch's own timeout is only a backstop: the hard deadline decides, and names the rank that never joined
    argv_tail += ["--warmup", str(warmup), "--init-timeout", str(timeout + 30.0)]
    members = [(argv_tail, child_env(base, rank, world_size, port)) for rank in range(world_size)]
    group = children.run_group(python, source, members, timeout=timeout)
    seconds = time.monotonic() - start
    ranks = group.results
    if group.timed_out:
        return GroupResult("timeout", _timeout_message(ranks, timeout), world_size, seconds=seconds)
    if group.failed is not None:
        error = _failure_message(group.failed, ranks[group.failed], python)
        return GroupResult("failed", error, world_size, seconds=seconds)
    results = []
    for rank, r in enumerate(ranks):
        result = _first(r, "result")
        if result is None:
            error = f"rank {rank} exited without a result" + children.last_line(r.stderr)
            return GroupResult("failed", error, world_size, seconds=seconds)
        results.append({k: v for k, v in result.items() if k != "event"})
    return GroupResult("ok", None, world_size, tuple(results), seconds)


def per_rank(result: GroupResult, key: str) -> list[float | None]:
    by_rank = {r.get("rank"): r.get(key) for r in result.ranks}
    return [by_rank.get(i) for i in range(result.world_size)]


def outliers(
    values: Sequence[float | None], groups: Sequence[str | None] | None = None, factor: float = 1.5
) -> list[int]:
    """Indices whose value exceeds ``factor`` × the median of their group (identical GPUs)."""
    keys = list(groups) if groups is not None else [None] * len(values)
    found: list[int] = []
    for key in set(keys):
        members = [i for i, k in enumerate(keys) if k == key and values[i] is not None]
        if len(members) < 2:
            continue
        mid = median(float(values[i]) for i in members)  # type: ignore[arg-type]
        found += [i for i in members if mid > 0 and float(values[i]) > factor * mid]  # type: ignore[arg-type]
    return sorted(found)


def _first(rank: CommandResult, event: str) -> dict[str, Any] | None:
    return next((e for e in parse_events(rank.stdout) if e.get("event") == event), None)


def _failure_message(rank: int, result: CommandResult, python: str) -> str:
    if result.returncode is None:
        return f"cannot start rank {rank} with {python}: {result.error}"
    error = _first(result, "error")
    if error is not None:
        return f"rank {rank}: {error.get('error')}"
    return f"rank {rank} exited with status {result.returncode}" + children.last_line(result.stderr)


def _timeout_message(ranks: Sequence[CommandResult], timeout: float) -> str:
    # A rank that never reached init_process_group is the culprit; the others merely wait.
    def missing(event: str) -> list[int]:
        return [rank for rank, r in enumerate(ranks) if _first(r, event) is None]

    absent = missing("joining") or missing("joined")
    if absent:
        who = f"rank {absent[0]}" if len(absent) == 1 else "ranks " + ", ".join(str(m) for m in absent)
        return f"timeout: {who} did not join within {timeout:g} s"
    names = ", ".join(str(m) for m in missing("result")) or "none"
    return f"timeout: all-reduce did not finish within {timeout:g} s (ranks still running: {names})"

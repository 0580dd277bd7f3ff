"""Launch one all-reduce rank per GPU under one hard deadline, and read back their results.

``process.run_command`` runs one program to completion; a process group needs N programs
running at once under one shared deadline, so this module starts them itself with the same
policy: each rank in its own session, and on timeout or on the first failing rank every
rank's whole process group is killed.  Nothing here raises: every outcome is a
``GroupResult``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from cuda_doctor.process import kill_group

CHILD = Path(__file__).with_name("allreduce_child.py")
DEFAULT_SIZES = (1 << 20, 16 << 20, 256 << 20)  # 1 MiB, 16 MiB, 256 MiB
_STDERR_TAIL = 2000


@dataclass(frozen=True)
class GroupResult:
    """What the whole group concluded.  ``status`` is "ok", "failed" or "timeout"."""

    status: str
    error: str | None
    world_size: int
    ranks: tuple[dict[str, Any], ...] = ()  # each rank's "result" object, by rank
    seconds: float = 0.0
    stderr_tails: dict[int, str] = field(default_factory=dict)

    @property
    def sum_ok(self) -> bool | None:
        if not self.ranks:
            return None
        return all(bool(r.get("sum_ok")) for r in self.ranks)

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


@dataclass
class _Rank:
    rank: int
    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def has(self, event: str) -> bool:
        return any(e.get("event") == event for e in self.events)

    def first(self, event: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("event") == event), None)


def parse_events(text: str) -> list[dict[str, Any]]:
    """JSON-object lines of a rank's stdout; anything else (library chatter) is skipped."""
    events = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "event" in value:
            events.append(value)
    return events


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(base: Mapping[str, str], rank: int, world_size: int, port: int) -> dict[str, str]:
    env = dict(base)
    # NVLink SHARP (NVLS) multicast is never used by the smoke, whatever the caller's env says.
    env["NCCL_NVLS_ENABLE"] = "0"
    env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    env.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        PYTHONUNBUFFERED="1",
    )
    return env


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
    script: Path = CHILD,
) -> GroupResult:
    """Run ``world_size`` ranks of ``script`` with ``python``; kill them all at ``timeout``."""
    start = time.monotonic()
    base = dict(os.environ if env is None else env)
    port = free_port()
    argv_tail = [
        "--backend",
        backend,
        "--sizes",
        ",".join(str(s) for s in sizes),
        "--iters",
        str(iters),
        "--warmup",
        str(warmup),
        # torch's own timeout is only a backstop should this launcher die: the hard deadline
        # below decides, and it can name the rank that never joined
        "--init-timeout",
        str(timeout + 30.0),
    ]
    ranks: list[_Rank] = []
    threads: list[threading.Thread] = []
    for rank in range(world_size):
        try:
            proc = subprocess.Popen(
                [python, str(script), *argv_tail],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env(base, rank, world_size, port),
                text=True,
                errors="replace",
                start_new_session=True,  # one process group per rank, killed as a whole
            )
        except OSError as exc:
            _kill_all(ranks)
            return GroupResult(
                "failed",
                f"cannot start rank {rank} with {python}: {exc.strerror or exc}",
                world_size,
                seconds=time.monotonic() - start,
            )
        r = _Rank(rank, proc)
        ranks.append(r)
        threads += [
            threading.Thread(target=_read_events, args=(r,), daemon=True),
            threading.Thread(target=_read_stderr, args=(r,), daemon=True),
        ]
    for t in threads:
        t.start()

    deadline = start + timeout
    failed: _Rank | None = None
    while True:
        codes = [r.proc.poll() for r in ranks]
        failed = next((r for r, c in zip(ranks, codes, strict=False) if c not in (None, 0)), None)
        if failed is not None or all(c is not None for c in codes):
            break
        if time.monotonic() >= deadline:
            _kill_all(ranks)
            _join(threads)
            return GroupResult(
                "timeout",
                _timeout_message(ranks, timeout),
                world_size,
                seconds=time.monotonic() - start,
                stderr_tails=_tails(ranks),
            )
        time.sleep(0.05)

    if failed is not None:
        _kill_all(ranks)  # the others would wait for the failed rank until their own timeout
    _join(threads)
    seconds = time.monotonic() - start
    if failed is not None:
        return GroupResult("failed", _failure_message(failed), world_size, seconds=seconds, stderr_tails=_tails(ranks))
    results = []
    for r in ranks:
        result = r.first("result")
        if result is None:
            return GroupResult(
                "failed",
                f"rank {r.rank} exited without a result" + _last_line(r),
                world_size,
                seconds=seconds,
                stderr_tails=_tails(ranks),
            )
        results.append({k: v for k, v in result.items() if k != "event"})
    return GroupResult("ok", None, world_size, tuple(results), seconds, _tails(ranks))


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


# -- helpers ---------------------------------------------------------------------------------
def _read_events(r: _Rank) -> None:
    assert r.proc.stdout is not None
    for line in r.proc.stdout:
        r.events.extend(parse_events(line))


def _read_stderr(r: _Rank) -> None:
    assert r.proc.stderr is not None
    for line in r.proc.stderr:
        r.stderr.append(line)
        if len(r.stderr) > 200:
            del r.stderr[:100]


def _kill_all(ranks: Sequence[_Rank]) -> None:
    for r in ranks:
        if r.proc.poll() is None:
            kill_group(r.proc)
    for r in ranks:
        try:
            r.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            r.stderr.append(f"rank {r.rank} (pid {r.proc.pid}) survived SIGKILL for 5 s\n")


def _join(threads: Sequence[threading.Thread]) -> None:
    for t in threads:
        t.join(timeout=2)


def _tails(ranks: Sequence[_Rank]) -> dict[int, str]:
    return {r.rank: "".join(r.stderr)[-_STDERR_TAIL:] for r in ranks if r.stderr}


def _last_line(r: _Rank) -> str:
    lines = [ln.strip() for ln in r.stderr if ln.strip()]
    return f": {lines[-1]}" if lines else ""


def _failure_message(r: _Rank) -> str:
    error = r.first("error")
    if error is not None:
        return f"rank {r.rank}: {error.get('error')}"
    return f"rank {r.rank} exited with status {r.proc.returncode}" + _last_line(r)


def _timeout_message(ranks: Sequence[_Rank], timeout: float) -> str:
    # A rank that never reached init_process_group is the culprit; the others merely wait.
    missing = [r.rank for r in ranks if not r.has("joining")] or [r.rank for r in ranks if not r.has("joined")]
    if missing:
        who = f"rank {missing[0]}" if len(missing) == 1 else "ranks " + ", ".join(str(m) for m in missing)
        return f"timeout: {who} did not join within {timeout:g} s"
    running = [r.rank for r in ranks if not r.has("result")]
    names = ", ".join(str(m) for m in running) or "none"
    return f"timeout: all-reduce did not finish within {timeout:g} s (ranks still running: {names})"

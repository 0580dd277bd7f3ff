"""One check per node under a multi-process launcher (``torchrun``, ``srun``, Lightning, DeepSpeed):
local rank 0 checks and writes its verdict into a private per-node folder; the other local ranks
wait for that verdict instead of putting their own work on the same GPUs.

A waiting process finds the verdict under one of two keys, so that no launcher has to be named:

- its parent process (pid and start time): the launcher that started every local rank
  (torchrun's agent, slurmstepd, mpirun's daemon), or local rank 0 itself when that process
  started the others (Lightning's and DeepSpeed's launchers).  Rank 0 writes under its parent and
  under itself, so either relation finds it.  A pid with its start time names one process ever.
- the job, from the launcher's variables (``SLURM_JOB_ID`` and step, ``TORCHELASTIC_RUN_ID`` and
  restart count, ``MASTER_ADDR:MASTER_PORT``), for ranks whose parents differ (``srun bash -c``);
  such a verdict counts only when written after the waiting process started (less ``JOB_SLACK``),
  since a later job may reuse the same names.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.base import atomic

#: Seconds by which a job-keyed verdict may predate the waiting process (ranks start together).
JOB_SLACK = 60.0
#: Seconds a verdict file is kept (a run's ranks read it within minutes).
KEEP = 86400.0
#: How often a waiting process looks for the verdict.
POLL = 0.05
#: A verdict file is a few kilobytes (the checklist); anything larger is not ours.
MAX_VERDICT_BYTES = 1 << 20
_JOB_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "MASTER_ADDR",
    "MASTER_PORT",
)


@dataclass(frozen=True)
class Verdict:
    """What local rank 0 concluded: ``ok`` False carries the checklist (or the error) to raise."""

    ok: bool
    headline: str
    checklist: str


def local_rank(env: Mapping[str, str]) -> int:
    """``LOCAL_RANK`` (torchrun, Lightning, DeepSpeed, accelerate), else Slurm's ``SLURM_LOCALID``
    inside a job step; 0 when neither says (a process on its own checks for itself)."""
    for name in ("LOCAL_RANK", "SLURM_LOCALID"):
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def started(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), None when unreadable."""
    try:
        text = (proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")[:4096]
        return text.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def started_at(pid: int, proc: Path = Path("/proc")) -> float | None:
    """The process's start as wall-clock seconds (now, less the time since boot, plus its start
    ticks), None when unknown."""
    ticks = started(pid, proc)
    try:
        with open(proc / "uptime", encoding="ascii", errors="replace") as handle:
            since_boot = float(handle.read(256).split()[0])
        return time.time() - since_boot + int(ticks or "") / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def job_key(env: Mapping[str, str]) -> str | None:
    """A name every local rank of one job shares, from the launcher's variables; None when none is set."""
    present = [f"{name}={env[name]}" for name in _JOB_VARIABLES if env.get(name, "").strip()]
    if not present or (env.get("TORCHELASTIC_RUN_ID") == "none" and len(present) <= 2):
        return None  # torchrun's default run id alone names no job
    return "job-" + hashlib.sha256("\n".join(present).encode()).hexdigest()[:32]


def process_key(pid: int, env: Mapping[str, str], proc: Path = Path("/proc")) -> str | None:
    """A name for the children of one process; torchrun's restarts of its workers each get their own."""
    start = started(pid, proc)
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "").strip()
    restart = restart if restart.isdigit() and len(restart) < 10 else "0"  # it becomes part of a file name
    return f"proc-{pid}-{start}-{restart}" if start is not None else None


def folder(root: Path | None = None) -> Path | None:
    """This user's per-node verdict folder (created 0700), None when it cannot be trusted: a
    folder another user owns, or one others may write to, could hold a planted verdict."""
    base = (root or Path(tempfile.gettempdir())) / f"cuda-doctor-{os.geteuid()}"
    with contextlib.suppress(FileExistsError, OSError):
        base.mkdir(mode=0o700)
    try:
        info = os.lstat(base)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return None
    return base


def writer_keys(env: Mapping[str, str], pid: int, ppid: int, proc: Path = Path("/proc")) -> list[str]:
    """The keys local rank 0 writes under: itself, its parent and the job."""
    keys = [process_key(pid, env, proc), process_key(ppid, env, proc), job_key(env)]
    return list(dict.fromkeys(key for key in keys if key is not None))


def publish(where: Path, keys: list[str], verdict: Verdict, pid: int) -> None:
    """Write ``verdict`` under each key, atomically (a reader sees all of it or none), and remove
    the verdicts of earlier days: nothing else ever reads them."""
    prune(where, time.time() - KEEP)
    data = json.dumps({"ok": verdict.ok, "headline": verdict.headline, "checklist": verdict.checklist, "pid": pid})
    written = json.dumps(time.time())
    for key in keys:
        with contextlib.suppress(OSError):  # a verdict not shared makes the others check for themselves
            atomic.write_bytes(where / f"{key}.json", f'{{"written": {written}, "verdict": {data}}}'.encode(), 0o600)


def prune(where: Path, before: float) -> None:
    with contextlib.suppress(OSError):
        for path in where.glob("*.json"):
            with contextlib.suppress(OSError):
                if path.lstat().st_mtime < before:
                    path.unlink()


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(MAX_VERDICT_BYTES + 1)[:MAX_VERDICT_BYTES])
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("verdict"), dict) else None


def _as_verdict(data: dict[str, Any]) -> Verdict | None:
    verdict = data["verdict"]
    ok, headline, checklist = verdict.get("ok"), verdict.get("headline"), verdict.get("checklist")
    if not isinstance(ok, bool) or not isinstance(headline, str) or not isinstance(checklist, str):
        return None
    return Verdict(ok, headline, checklist)


def await_verdict(
    where: Path,
    env: Mapping[str, str],
    ppid: int,
    wait: float,
    *,
    my_start: float | None,
    proc: Path = Path("/proc"),
) -> Verdict | None:
    """The verdict local rank 0 wrote for this process, waiting up to ``wait`` seconds; None when none came."""
    parent = process_key(ppid, env, proc)
    job = job_key(env)
    deadline = time.monotonic() + wait
    while True:
        if parent is not None:
            data = _read(where / f"{parent}.json")
            if data is not None:
                return _as_verdict(data)
        if job is not None and my_start is not None:
            data = _read(where / f"{job}.json")
            written = data.get("written") if data is not None else None
            if data is not None and isinstance(written, (int, float)) and written >= my_start - JOB_SLACK:
                return _as_verdict(data)
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL)

"""Worker processes for reading many reports: order kept, errors raised, none outlives cuda-doctor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from cuda_doctor.base import parallel
from tests.conftest import gone, wait_until

pytestmark = pytest.mark.skipif(not parallel.available(), reason="worker processes are forked on Linux only")


def pids(chunk: Sequence[int]) -> list[tuple[int, int]]:
    return [(os.getpid(), item * item) for item in chunk]


def broken(chunk: Sequence[int]) -> list[int]:
    raise ValueError(f"chunk starting at {chunk[0]}")


def test_chunks_run_in_workers_and_come_back_in_order() -> None:
    out = parallel.map_chunks(pids, list(range(100)), jobs=2)
    assert out is not None
    assert [square for _, square in out] == [i * i for i in range(100)]
    workers = {pid for pid, _ in out}
    assert os.getpid() not in workers and 1 <= len(workers) <= 2


def test_no_workers_for_one_job_or_one_item() -> None:
    assert parallel.map_chunks(pids, list(range(10)), jobs=1) is None
    assert parallel.map_chunks(pids, [3], jobs=4) is None


def test_an_exception_in_a_worker_is_raised_here() -> None:
    with pytest.raises(ValueError, match="chunk starting at"):
        parallel.map_chunks(broken, list(range(10)), jobs=2)


def signals(chunk: Sequence[int]) -> list[tuple[bool, bool, int]]:
    return [
        (
            signal.getsignal(signal.SIGINT) is signal.SIG_DFL,
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
            signal.set_wakeup_fd(-1),
        )
        for _ in chunk
    ]


def test_workers_leave_interrupts_to_cuda_doctor() -> None:
    """A worker does not run cuda-doctor's handler (it would say "stopped" once more) nor write
    to its wakeup pipe: Ctrl-C simply ends it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end)
    handler = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        out = parallel.map_chunks(signals, list(range(4)), jobs=2)
    finally:
        signal.set_wakeup_fd(previous)
        signal.signal(signal.SIGTERM, handler)
        os.close(read_end)
        os.close(write_end)
    assert out == [(True, True, -1)] * 4


def test_default_jobs_follow_the_cpus_and_the_work() -> None:
    assert parallel.default_jobs(10, per_job=250) == 1
    assert 1 <= parallel.default_jobs(100_000, per_job=250) <= min(parallel.usable_cpus(), parallel.MAX_JOBS)


SLOW_WORKERS = """
import os, sys, time
from pathlib import Path
from cuda_doctor.base import parallel
from cuda_doctor.base.process import stop_children_on_signals

def slow(chunk):
    Path(sys.argv[1], str(os.getpid())).write_text("")
    time.sleep(60)
    return list(chunk)

if __name__ == "__main__":
    stop_children_on_signals()  # as cuda-doctor's entry does
    parallel.map_chunks(slow, list(range(8)), jobs=2)
"""


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent(SLOW_WORKERS))
    seen = tmp_path / "pids"
    seen.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(seen)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert wait_until(lambda: len(list(seen.iterdir())) == 2), "two workers should have started"
    return proc, [int(p.name) for p in seen.iterdir()]


def test_workers_end_when_cuda_doctor_is_killed(tmp_path: Path) -> None:
    proc, workers = _start(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # no handler runs: the kernel ends the workers
    proc.communicate(timeout=30)
    assert wait_until(lambda: all(gone(pid) for pid in workers), 10), workers


def test_ctrl_c_stops_everything_with_one_line(tmp_path: Path) -> None:
    proc, workers = _start(tmp_path)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip() == "cuda-doctor: stopped by SIGINT", err
    assert wait_until(lambda: all(gone(pid) for pid in workers), 10)

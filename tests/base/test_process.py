"""External programs: time and output bounds, and the registry that an interrupt empties."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cuda_doctor.base import process
from tests.conftest import gone, wait_for_file, wait_until

ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


def test_a_flooding_program_is_stopped_at_the_cap() -> None:
    result = process.run_command(["yes", "flood"], timeout=120, env=ENV, cap=1 << 20)
    assert result.cut and result.returncode is None and not result.ok
    assert result.error == "yes produced more than 1 MiB of output and was stopped"
    assert len(result.stdout) <= 1 << 20 and result.stdout.startswith("flood\nflood\n")


def test_a_hung_program_is_killed_with_its_group(tmp_path: Path) -> None:
    script = f"sleep 600 & echo $$ $! > {tmp_path / 'pids'}; wait"
    result = process.run_command(["sh", "-c", script], timeout=1, env=ENV)
    assert result.timed_out and result.error == "sh did not answer in 1 s"
    pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    assert wait_until(lambda: all(gone(pid) for pid in pids))


def test_a_failing_program_names_its_last_line() -> None:
    result = process.run_command(["sh", "-c", "echo first >&2; echo 'the reason' >&2; exit 3"], timeout=30, env=ENV)
    assert result.returncode == 3 and result.error == "sh exited with status 3: the reason"
    missing = process.run_command(["no-such-program-here"], timeout=30, env=ENV)
    assert missing.error == "no-such-program-here not found on PATH"


def test_kill_all_kills_every_group_still_running(tmp_path: Path) -> None:
    script = f"sleep 600 & echo $$ $! > {tmp_path / 'pids'}; wait"
    proc = process.start_streaming(["sh", "-c", script], ENV)
    assert not isinstance(proc, str)
    pids = [int(pid) for pid in wait_for_file(tmp_path / "pids").split()]
    assert process.kill_all() >= 1
    assert proc.wait(timeout=30) == -9
    process.untrack(proc)
    assert wait_until(lambda: all(gone(pid) for pid in pids))


def test_a_reaped_child_leaves_the_registry() -> None:
    proc = process.start_streaming(["true"], ENV)
    assert not isinstance(proc, str)
    assert process.wait_or_kill(proc, 30) == (False, False)
    assert proc.pid not in process._RUNNING


def test_a_signal_landing_on_another_thread_still_stops_everything(tmp_path: Path) -> None:
    # Python runs handlers in the main thread only; here the main thread waits on a lock (as
    # it does joining a probe) and the signal goes to a worker, so only the wakeup pipe sees it.
    pidfile = tmp_path / "pid"
    script = f"""
import os, signal, sys, threading, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from cuda_doctor.base import process
process.stop_children_on_signals()
process.start_streaming(["sh", "-c", "echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 600"], None)
def worker():
    while not os.path.exists({str(pidfile)!r}):
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
threading.Thread(target=worker).start()
threading.Event().wait()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr
    assert done.stderr == "cuda-doctor: stopped by SIGTERM; 1 child process group(s) killed\n"
    pid = int(pidfile.read_text())
    assert wait_until(lambda: gone(pid))

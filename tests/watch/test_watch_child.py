"""`cuda-doctor watch` as a real process: exit codes, signals, output passthrough."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_doctor.watch.child import exit_code_of

ROOT = Path(__file__).resolve().parents[2]
WATCH = [sys.executable, "-m", "cuda_doctor", "watch", "--interval", "0.2", "--"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _watch(*argv: str, input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*WATCH, *argv], input=input_bytes, capture_output=True, env=_env(), timeout=60, check=False)


def test_exit_code_passes_through() -> None:
    result = _watch(sys.executable, "-c", "import sys; sys.exit(7)")
    assert result.returncode == 7
    assert b"cuda-doctor watch" in result.stderr  # the report went to stderr


def test_a_child_killed_by_sigterm_exits_143() -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert _watch(sys.executable, "-c", code).returncode == 128 + signal.SIGTERM


def test_output_passes_through_byte_exact() -> None:
    payload = b"line one\r\n\x00\xff\xfe not utf-8 \x1b[31mred\x1b[0m\nno newline at the end"
    code = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()); sys.stderr.buffer.write(b'to stderr\\n')"
    result = _watch(sys.executable, "-c", code, input_bytes=payload)
    assert result.returncode == 0
    assert result.stdout == payload  # nothing of the report on stdout
    assert result.stderr.startswith(b"to stderr\n")


def test_options_after_the_command_belong_to_it() -> None:
    result = _watch(sys.executable, "-c", "import sys; print(sys.argv[1:])", "--format", "-x")
    assert result.stdout == b"['--format', '-x']\n"


def test_a_missing_command_exits_127_with_one_line() -> None:
    result = _watch("cuda-doctor-no-such-command-here", "arg")
    assert result.returncode == 127
    lines = result.stderr.decode().strip().splitlines()
    assert lines == ["cuda-doctor watch: cuda-doctor-no-such-command-here: command not found"]
    assert result.stdout == b""


def test_a_file_that_is_not_executable_exits_126(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o644)
    result = _watch(str(script))
    assert result.returncode == 126
    assert b"permission denied" in result.stderr


@pytest.mark.parametrize(
    ("signum", "expected"),
    [(signal.SIGTERM, 42), (signal.SIGINT, 128 + signal.SIGINT)],
)
def test_a_signal_sent_to_watch_reaches_the_child(signum: int, expected: int) -> None:
    child = (
        "import signal, sys, time\n"
        "def bye(*a):\n"
        "    print('child got SIGTERM', flush=True)\n"
        "    sys.exit(42)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen(
        [*WATCH, sys.executable, "-c", child],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        start_new_session=True,  # no terminal: the signal reaches only what we send it to
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == expected, err.decode()
    if signum == signal.SIGTERM:
        assert out == b"child got SIGTERM\n"
    assert b"cuda-doctor watch" in err  # the report still came


def test_exit_code_of_maps_signals_like_a_shell() -> None:
    assert exit_code_of(0) == 0
    assert exit_code_of(3) == 3
    assert exit_code_of(-9) == 137


def test_the_command_is_registered_so_an_interrupt_kills_it_alone() -> None:
    from cuda_doctor.base import process
    from cuda_doctor.watch.child import spawn, wait

    proc = spawn(["sleep", "600"])
    assert isinstance(proc, subprocess.Popen)
    assert process.kill_all() >= 1  # what the interrupt handler does; it shares our group,
    assert wait(proc) == 128 + signal.SIGKILL  # so the process alone was killed: we are alive

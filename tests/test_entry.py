"""The process entry point: exit statuses, signals, and every byte of the output."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_doctor.entry import exit_status
from tests.conftest import gone, group_gone, run_doctor, wait_for_file, wait_until, with_driver_library

TESTS = Path(__file__).resolve().parent
FAKE_PYNVML = TESTS / "fakes" / "pynvml_h200"


def _exits(code: object) -> None:
    raise SystemExit(code)


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (1, 1), (2, 2), (127, 127)])
def test_exit_status_is_what_sys_exit_gives(code: object, status: int) -> None:
    assert exit_status(lambda: _exits(code)) == status


def test_a_returning_command_exits_0() -> None:
    assert exit_status(lambda: None) == 0


def test_a_message_as_exit_code_is_printed_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status(lambda: _exits("cannot go on")) == 1
    assert capsys.readouterr().err == "cannot go on\n"


def doctor(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = with_driver_library({**os.environ, **env}, tmp_path / "driver")
    full_env.pop("CUDA_DOCTOR_DISABLE_NVML", None)
    return run_doctor(args, cwd=tmp_path, env=full_env, first_on_path=(FAKE_PYNVML,), timeout=120)


def test_check_reads_nvml_once_and_ends_with_all_its_output(tmp_path: Path) -> None:
    log = tmp_path / "nvml-calls.txt"
    saved = tmp_path / "report.json"
    proc = doctor(["check", "--fast", "--format", "json", "--save", str(saved)], tmp_path, FAKE_PYNVML_LOG=str(log))
    assert proc.returncode in (0, 1), proc.stderr  # findings depend on this host's container and /dev/shm
    report = json.loads(proc.stdout)  # complete: flushed before the process ended
    assert json.loads(saved.read_text(encoding="utf-8")) == report
    values = report["facts"]["values"]
    assert values["driver.source"] == "nvml"
    assert values["driver.version"] == "580.159.04"
    assert values["gpu.count"] == 2
    assert values["gpu[1].name"] == "NVIDIA H200"
    assert values["probe.gpu.status"] == "ok"
    calls = log.read_text(encoding="utf-8").split()
    assert calls.count("nvmlInit") == 1  # the read started at entry was the probe's read
    assert calls.count("nvmlDeviceGetHandleByIndex") == 2
    # --fast reached the read ahead: what no fast rule reads stays unasked
    assert "nvmlDeviceGetCurrPcieLinkGeneration" not in calls
    assert "gpu[0].pcie_gen_max" in report["facts"]["unknown"]


def test_text_checklist_through_a_pipe_is_complete(tmp_path: Path) -> None:
    proc = doctor(["check", "--fast", "-v"], tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout.startswith("driver 580.159.04 (CUDA 13.0) · 2× NVIDIA H200")
    assert "ready to train" in proc.stdout or "failed" in proc.stdout.splitlines()[-1]
    assert proc.stdout.endswith(")\n")  # the summary line's "(exit N)", and nothing cut off


def test_usage_errors_still_exit_2_with_one_line(tmp_path: Path) -> None:
    proc = doctor(["check", "--timeout", "nonsense"], tmp_path)
    assert proc.returncode == 2
    assert "Invalid value for '--timeout'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_broken_binding_is_a_reason_not_a_traceback(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pynvml.py").write_text('raise ImportError("libfoo.so: undefined symbol")\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(broken), str(TESTS.parent)])}
    env = with_driver_library(env, tmp_path / "driver")  # a GPU machine whose binding is broken
    env.pop("CUDA_DOCTOR_DISABLE_NVML", None)
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", "--fast", "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert "libfoo.so: undefined symbol" in report["facts"]["values"]["nvml.error"]


# -- interrupts: every child group killed, one line, 130 / 143 ---------------------------------------
def _interpreter_that_hangs(tmp_path: Path) -> Path:
    """A --python that never starts the probe: it records its pid and its helper's, then waits."""
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nsleep 600 &\necho $$ $! > {tmp_path / 'pids'}\nwait\n", encoding="utf-8")
    python.chmod(0o755)
    return python


@pytest.mark.parametrize(
    ("signals", "status"),
    [
        ((signal.SIGINT,), 130),
        ((signal.SIGTERM,), 143),
        ((signal.SIGINT, signal.SIGINT), 130),  # a double Ctrl-C
    ],
)
def test_an_interrupted_check_leaves_no_child_running(
    tmp_path: Path, signals: tuple[signal.Signals, ...], status: int
) -> None:
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent), "PATH": os.defpath, "CUDA_DOCTOR_DISABLE_NVML": "1"}
    env.pop("DOCKER_HOST", None)
    python = _interpreter_that_hangs(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cuda_doctor", "check", "--python", str(python), "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    try:
        pid, helper = (int(p) for p in wait_for_file(tmp_path / "pids").split())
        for signum in signals:
            proc.send_signal(signum)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == status
    assert re.fullmatch(rf"cuda-doctor: stopped by {signals[0].name}; \d+ child process group\(s\) killed\n", err), err
    # The probe's child led its own group: all of it is gone (SIGKILL takes a moment to land).
    assert wait_until(lambda: group_gone(pid) and gone(pid) and gone(helper))

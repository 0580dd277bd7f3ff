"""``cuda-doctor exec`` as a real process: it checks, then becomes the command (or refuses)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

ALWAYS_FAILS = """
id = "TEST001"
title = "always fails"
category = "environment"
severity = "{severity}"
rationale = "a rule that fires on every machine, for testing exec"
links = []
[[outcome]]
when = {{ fact = "no.such.fact", exists = false }}
message = "this rule always fires"
"""


def project(tmp_path: Path, *, failing: str | None = None) -> Path:
    """A working directory whose pyproject selects only a rule that is skipped, or one that fires."""
    work = tmp_path / "work"
    work.mkdir()
    if failing is None:
        config = '[tool.cuda-doctor]\nselect = ["CD901"]\n'  # skipped under the fast check
    else:
        rules = work / "myrules"
        rules.mkdir()
        (rules / "TEST001.toml").write_text(ALWAYS_FAILS.format(severity=failing))
        config = '[tool.cuda-doctor]\nselect = ["TEST"]\nrules-dirs = ["myrules"]\n'
    (work / "pyproject.toml").write_text(config)
    return work


def exec_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cuda_doctor", "exec", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        exec_argv(*args), cwd=cwd, env=env(), capture_output=True, text=True, timeout=120, check=False
    )


def test_the_exit_status_passes_through(tmp_path: Path) -> None:
    proc = run(project(tmp_path), "--", "sh", "-c", "echo started; exit 7")
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout == "started\n"  # the checklist goes to stderr, never into CMD's stdout
    assert "skipped" in proc.stderr


def test_same_pid_and_sigterm_reaches_the_command(tmp_path: Path) -> None:
    work = project(tmp_path)
    pidfile, marker = tmp_path / "pid", tmp_path / "terminated"
    script = (
        f'trap "echo TERM > {marker}; exit 42" TERM; echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; '
        "while :; do sleep 0.1; done"
    )
    proc = subprocess.Popen(exec_argv("--", "sh", "-c", script), cwd=work, env=env(), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        assert int(pidfile.read_text()) == proc.pid  # exec, not a child process
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 42
        assert marker.read_text().strip() == "TERM"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_findings_stop_the_command(tmp_path: Path) -> None:
    work = project(tmp_path, failing="error")
    marker = tmp_path / "ran"
    proc = run(work, "--", "touch", str(marker))
    assert proc.returncode == 1
    assert not marker.exists()
    assert "this rule always fires" in proc.stderr
    assert "not starting touch" in proc.stderr


def test_warn_only_starts_the_command_anyway(tmp_path: Path) -> None:
    work = project(tmp_path, failing="error")
    proc = run(work, "--warn-only", "--", "sh", "-c", "exit 5")
    assert proc.returncode == 5
    assert "this rule always fires" in proc.stderr


def test_fail_on_decides_what_stops_the_command(tmp_path: Path) -> None:
    work = project(tmp_path, failing="warning")
    assert run(work, "--", "true").returncode == 0  # a warning does not stop it by default
    assert run(work, "--fail-on", "warning", "--", "true").returncode == 1


def test_a_command_that_does_not_exist(tmp_path: Path) -> None:
    proc = run(project(tmp_path), "--", "no-such-command-anywhere", "--flag")
    assert proc.returncode == 127
    assert proc.stderr.strip() == "cuda-doctor exec: no-such-command-anywhere: command not found"


def test_a_file_that_is_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    proc = run(project(tmp_path), "--", str(script))
    assert proc.returncode == 126
    assert "Permission denied" in proc.stderr


def test_arguments_that_look_like_options_belong_to_the_command(tmp_path: Path) -> None:
    proc = run(project(tmp_path), "--", "sh", "-c", 'echo "$@"', "sh", "--verbose", "-x")
    assert proc.returncode == 0
    assert proc.stdout == "--verbose -x\n"


def test_a_command_is_required(tmp_path: Path) -> None:
    proc = run(project(tmp_path))
    assert proc.returncode == 2


@pytest.mark.parametrize("flag", ["--with-framework"])
def test_with_framework_still_execs(tmp_path: Path, flag: str) -> None:
    proc = run(project(tmp_path), flag, "--", "sh", "-c", "exit 3")
    assert proc.returncode == 3


def test_cmd_starts_only_after_nvml_is_shut_down(
    make_nvml: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_doctor.commands import exec_
    from cuda_doctor.core.probe import ProbeContext
    from cuda_doctor.gpu.nvml.read import collect_nvml

    release = threading.Event()
    fake = make_nvml(hang=release, hang_in="nvmlShutdown")
    collect_nvml(ProbeContext(env={}), fake.module())
    started: list[tuple[str, list[str]]] = []

    def execvp(program: str, argv: list[str]) -> None:
        started.append((program, argv))
        raise SystemExit(0)  # what exec would be: this process does not go on

    monkeypatch.setattr(os, "execvp", execvp)
    threading.Timer(0.3, release.set).start()  # NVML finishes shutting down a moment later
    with pytest.raises(SystemExit):
        exec_._become(("python", "train.py"))
    assert fake.shutdowns == 1  # closed before CMD was started
    assert started == [("python", ["python", "train.py"])]
    assert "did not shut down" not in capsys.readouterr().err


def test_a_wedged_nvml_does_not_keep_cmd_from_starting(
    make_nvml: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_doctor.commands import exec_
    from cuda_doctor.core.probe import ProbeContext
    from cuda_doctor.gpu.nvml.read import collect_nvml

    fake = make_nvml(hang=threading.Event(), hang_in="nvmlShutdown")  # released at teardown
    collect_nvml(ProbeContext(env={}), fake.module())
    started: list[str] = []

    def execvp(program: str, argv: list[str]) -> None:
        started.append(program)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execvp", execvp)
    with pytest.raises(SystemExit):
        exec_._become(("python", "train.py"))
    assert started == ["python"]
    assert "NVML did not shut down within 2 s; starting anyway" in capsys.readouterr().err


@pytest.mark.slow
def test_with_framework_judges_the_python_cmd_runs(tmp_path: Path, torch_cpu_python: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text('[tool.cuda-doctor]\nselect = ["CD201"]\n')
    proc = run(work, "--with-framework", "--warn-only", "--", str(torch_cpu_python), "-c", "raise SystemExit(5)")
    assert proc.returncode == 5
    assert "torch 2.13.0+cpu" in proc.stderr  # the CPU torch of CMD's interpreter, not this one's (none)
    assert f"checked {torch_cpu_python}: the interpreter CMD runs" in proc.stderr

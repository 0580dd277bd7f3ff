"""A closed standard output is one line and exit 2; one that nobody reads any more ends the
process quietly by SIGPIPE (141 in a shell), as other Unix tools do.  As real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_doctor.base.streams import CLOSED_MESSAGE

CUDA_DOCTOR = str(Path(sys.executable).with_name("cuda-doctor"))
H200_FACTS = Path(__file__).resolve().parents[1] / "rules" / "h200_facts.json"

COMMANDS = [
    ["check", "--fast"],
    ["check", "--facts", "report.json"],
    ["facts", "--fast"],
    ["fleet", "nodes"],
    ["lint", "code"],
    ["rules"],
    ["explain", "CD101"],
    ["--help"],
    ["check", "--help"],
]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    report = json.dumps({"facts": json.loads(H200_FACTS.read_text())})
    (tmp_path / "report.json").write_text(report, encoding="utf-8")
    (tmp_path / "nodes").mkdir()
    for index in range(3):
        (tmp_path / "nodes" / f"node{index}.json").write_text(report, encoding="utf-8")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("from torch.cuda.amp import GradScaler\n", encoding="utf-8")
    return tmp_path


def env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}",
        "XDG_CACHE_HOME": str(workdir / "cache"),
    }


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_closed_stdout_is_one_line_and_exit_2(workdir: Path, args: list[str]) -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" "$@" >&-', CUDA_DOCTOR, *args],
        cwd=workdir,
        env=env(workdir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [CLOSED_MESSAGE]


def unread_pipe(args: list[str], workdir: Path) -> subprocess.CompletedProcess[str]:
    """cuda-doctor writing into a pipe whose reader has gone (as after `| head -1`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [CUDA_DOCTOR, *args],
            cwd=workdir,
            env=env(workdir),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_pipe_nobody_reads_ends_quietly_by_sigpipe(workdir: Path, args: list[str]) -> None:
    done = unread_pipe(args, workdir)
    assert done.returncode == -signal.SIGPIPE
    assert done.stderr == ""


def test_the_saved_report_is_written_when_nobody_reads_stdout(workdir: Path) -> None:
    done = unread_pipe(["check", "--fast", "--save", "saved.json"], workdir)
    assert done.returncode == -signal.SIGPIPE
    assert json.loads((workdir / "saved.json").read_text())["schema"] == "cuda-doctor/report"


def test_a_command_that_writes_nothing_to_stdout_runs_with_it_closed(workdir: Path) -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" "$@" >&-', CUDA_DOCTOR, "facts", "--fast", "-o", "facts.json"],
        cwd=workdir,
        env=env(workdir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "driver.status" in (workdir / "facts.json").read_text()


def test_a_shell_pipeline_to_head_is_status_141(workdir: Path) -> None:
    nodes = workdir / "nodes"
    facts = json.loads(H200_FACTS.read_text())
    for index in range(3000):  # a table longer than a pipe holds, so the pipe does break
        facts["values"]["system.hostname"] = f"gpu-node-{index:04d}"
        (nodes / f"node{index}.json").write_text(json.dumps({"facts": facts}), encoding="utf-8")
    script = f'"{CUDA_DOCTOR}" fleet nodes --all-nodes | head -1; echo "status=${{PIPESTATUS[0]}}"'
    done = subprocess.run(
        ["bash", "-c", script], cwd=workdir, env=env(workdir), capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines() == ["cuda-doctor fleet", "status=141"]
    assert done.stderr == ""

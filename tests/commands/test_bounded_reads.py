"""Every file a command reads is bounded: what is not a regular file where a file is expected
(``/dev/zero``, a FIFO) is refused at once, and a file over its limit (docs/limits.md) is
refused before it is read.  End to end, as real processes; the subprocess timeout only turns a
hang into a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CUDA_DOCTOR = str(Path(sys.executable).with_name("cuda-doctor"))
H200_FACTS = Path(__file__).resolve().parents[1] / "rules" / "h200_facts.json"


def doctor(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}",
        "XDG_CACHE_HOME": str(cwd / "cache"),
    }
    return subprocess.run([CUDA_DOCTOR, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cuda-doctor: error: "), done.stderr
    return lines[0]


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "good.json"
    path.write_text(json.dumps({"facts": json.loads(H200_FACTS.read_text())}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--config", "/dev/zero"],
        ["check", "--fast", "--config", "/dev/zero"],
        ["lint", "--config", "/dev/zero", "."],
        ["check", "--facts", "/dev/zero"],
        ["diff", "good.json", "/dev/zero"],
    ],
    ids=lambda args: " ".join(args),
)
def test_dev_zero_where_a_file_is_expected(tmp_path: Path, report: Path, args: list[str]) -> None:
    line = one_error_line(doctor(args, tmp_path))
    assert "/dev/zero: not a regular file (a character device)" in line


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--fast", "--config", "fifo"],
        ["check", "--facts", "fifo"],
        ["diff", "good.json", "fifo"],
    ],
    ids=lambda args: " ".join(args),
)
def test_a_fifo_without_a_writer_is_refused_not_waited_on(tmp_path: Path, report: Path, args: list[str]) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert "fifo: not a regular file (a FIFO)" in one_error_line(doctor(args, tmp_path))


def test_a_rule_file_that_is_a_fifo_is_named(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    os.mkfifo(tmp_path / "rules" / "CD999.toml")
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-doctor]\nrules-dirs = ["rules"]\n', encoding="utf-8")
    line = one_error_line(doctor(["check", "--fast"], tmp_path))
    assert "CD999.toml" in line and "not a regular file (a FIFO)" in line


def test_a_configuration_over_the_limit_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "big.toml"
    config.write_text(f'fail-on = "error"\n# {"x" * (5 << 20)}\n', encoding="utf-8")
    line = one_error_line(doctor(["check", "--fast", "--config", "big.toml"], tmp_path))
    assert "big.toml: larger than 4 MiB (5.0 MiB): not a TOML file" in line


def test_a_report_over_the_limit_is_refused_before_it_is_read(tmp_path: Path, report: Path) -> None:
    with (tmp_path / "huge.json").open("wb") as handle:
        handle.truncate((64 << 20) + 1)  # sparse: refused by its size, not by reading 64 MiB
    line = one_error_line(doctor(["diff", "good.json", "huge.json"], tmp_path))
    assert "huge.json: larger than 64 MiB" in line


def test_a_configuration_edited_with_its_time_restored_is_read_again(tmp_path: Path) -> None:
    """`cp -p`, `rsync -a` and `tar` keep the size and restore the modification time."""
    config = tmp_path / "pyproject.toml"

    def ignored() -> set[str]:
        done = doctor(["check", "--fast", "--format", "json"], tmp_path)
        assert done.returncode in (0, 1, 2), done.stderr  # 2: no driver here, no verdict
        results = json.loads(done.stdout)["results"]
        return {r["rule"] for r in results if r["message"] == "ignored by config"}

    config.write_text('[tool.cuda-doctor]\nignore = ["CD402"]\n', encoding="utf-8")
    stamp = config.stat()
    assert ignored() == {"CD402"}  # now cached
    config.write_text('[tool.cuda-doctor]\nignore = ["CD503"]\n', encoding="utf-8")
    os.utime(config, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert ignored() == {"CD503"}

"""`cuda-doctor watch` options: the interval, where the report goes, and --save checked up front."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEPARATOR = "----- cuda-doctor watch report ({}) -----"


def _watch(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "watch", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "0.01"])
def test_bad_intervals_are_usage_errors(value: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = _watch("--interval", value, "--", "touch", str(marker))
    assert result.returncode == 2 and "--interval" in result.stderr
    assert not marker.exists()


def test_an_unwritable_save_path_fails_before_the_command_runs(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    marker = tmp_path / "ran"
    result = _watch("--save", str(tmp_path / "file" / "x.json"), "--", "touch", str(marker))
    assert result.returncode == 2 and "cannot write" in result.stderr and "--save" in result.stderr
    assert not marker.exists()


def test_missing_folders_of_the_save_path_are_created(tmp_path: Path) -> None:
    save = tmp_path / "a" / "b" / "run.json"
    result = _watch("--interval", "0.2", "--save", str(save), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0
    assert json.loads(save.read_text())["schema"] == "cuda-doctor/watch-report"


def test_json_report_on_stderr_comes_after_a_separator(tmp_path: Path) -> None:
    code = "import sys; print('out'); print('child err', file=sys.stderr)"
    result = _watch("--interval", "0.2", "--format", "json", "--", sys.executable, "-c", code)
    assert result.returncode == 0 and result.stdout == "out\n"
    before, after = result.stderr.split(SEPARATOR.format("json") + "\n")
    assert "child err" in before
    assert json.loads(after)["command"] == "watch"


def test_output_takes_the_report_in_the_chosen_format(tmp_path: Path) -> None:
    out = tmp_path / "new" / "report.md"
    result = _watch("--interval", "0.2", "--format", "markdown", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0
    assert out.read_text().startswith("## cuda-doctor watch:")
    assert SEPARATOR.format("markdown") not in result.stderr and "##" not in result.stderr


def test_json_with_save_only_goes_to_the_saved_file(tmp_path: Path) -> None:
    save = tmp_path / "run.json"
    result = _watch("--interval", "0.2", "--format", "json", "--save", str(save), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0 and "{" not in result.stderr
    assert f"report written to {save}" in result.stderr
    assert json.loads(save.read_text())["exit_code"] == 0


def test_unwritable_output_fails_before_the_command_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = _watch("-o", str(tmp_path), "--", "touch", str(marker))
    assert result.returncode == 2 and "--output" in result.stderr
    assert not marker.exists()

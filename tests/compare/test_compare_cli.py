from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from compare_reports import base_report, failing_rule, other_driver, scaled, slower_gpu, write

from cuda_doctor.commands.diff import command as diff_command
from cuda_doctor.commands.fleet import command as fleet_command


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture()
def pair(tmp_path: Path) -> tuple[Path, Path]:
    before = write(tmp_path / "before.json", other_driver(base_report()))
    after = slower_gpu(failing_rule(base_report()), 0.71, metrics=("h2d_pinned_gbps",))
    return before, write(tmp_path / "after.json", scaled(after, 1.04))


def test_diff_text_shows_changes_and_exits_1_when_worse(runner: CliRunner, pair: tuple[Path, Path]) -> None:
    result = runner.invoke(diff_command, [str(p) for p in pair])
    assert result.exit_code == 1, result.output
    out = result.output
    assert "570.195.03" in out and "580.159.04" in out
    assert "CD310" in out and "pass" in out and "fail" in out
    assert "0.74×" in out and "← slower" in out  # 0.71 × the 1.04 wobble
    assert "1.04×" in out and "within noise" in out
    assert "worse: 1 rule newly failing, 1 figure slower" in out


def test_diff_exit_0_when_nothing_worse(runner: CliRunner, tmp_path: Path) -> None:
    before = write(tmp_path / "b.json", other_driver(base_report()))
    after = write(tmp_path / "a.json", scaled(base_report(), 1.03))
    result = runner.invoke(diff_command, [str(before), str(after)])
    assert result.exit_code == 0, result.output
    assert "nothing got worse: 2 facts changed" in result.output


def test_diff_noise_option(runner: CliRunner, tmp_path: Path) -> None:
    before = write(tmp_path / "b.json", base_report())
    after = write(tmp_path / "a.json", scaled(base_report(), 0.97))
    assert runner.invoke(diff_command, [str(before), str(after)]).exit_code == 0
    for band in ("2%", "0.02"):
        result = runner.invoke(diff_command, [str(before), str(after), "--noise", band])
        assert result.exit_code == 1, result.output
    bad = runner.invoke(diff_command, [str(before), str(after), "--noise", "150%"])
    assert bad.exit_code == 2 and "below 100%" in bad.output


def test_diff_json(runner: CliRunner, pair: tuple[Path, Path]) -> None:
    result = runner.invoke(diff_command, [*map(str, pair), "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["schema"] == "cuda-doctor/diff" and data["worse"] is True
    assert data["rules"][0] == {
        "rule": "CD310",
        "subject": "GPU 0",
        "title": "No pending retired pages",
        "before": "pass",
        "after": "fail",
        "direction": "worse",
        "message": "GPU 0 has retired pages pending: reset the GPU or reboot",
    }
    assert data["summary"]["figures_slower"] == 1
    slow = [f for f in data["figures"] if f["verdict"] == "slower"]
    assert slow[0]["metric"] == "h2d_pinned_gbps"


def test_diff_markdown(runner: CliRunner, pair: tuple[Path, Path]) -> None:
    result = runner.invoke(diff_command, [*map(str, pair), "--format", "markdown"])
    assert result.output.startswith("## cuda-doctor diff: gpu-node-01")
    assert "| NVIDIA driver | 570.195.03 | 580.159.04 |" in result.output
    assert "**← slower**" in result.output


def test_diff_unreadable_input_is_one_line_and_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    good = write(tmp_path / "good.json", base_report())
    cut = tmp_path / "cut.json"
    cut.write_text(good.read_text()[:200])
    result = runner.invoke(diff_command, [str(cut), str(good)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cuda-doctor: error: {cut}: truncated JSON")


def _fleet(tmp_path: Path) -> Path:
    for i in range(1, 7):
        report = base_report(host=f"node{i:02d}", gpus=2)
        if i == 2:
            report = other_driver(report)
        if i == 4:
            report = slower_gpu(report, 0.6, gpu=1)
        write(tmp_path / f"node{i:02d}.json", report)
    (tmp_path / "node07.json").write_text("<html>502 Bad Gateway</html>")
    return tmp_path


def test_fleet_text(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(fleet_command, [str(_fleet(tmp_path))])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Majority configuration (5 of 6 nodes)" in out
    assert "node02" in out and "570.195.03" in out
    assert "node04 GPU 1" in out and "0.60×" in out
    assert "node07.json: not JSON" in out
    assert "6 nodes, 1 report unreadable, 1 differing from the majority" in out


def test_fleet_fail_on_difference(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(fleet_command, [str(_fleet(tmp_path)), "--fail-on-difference"])
    assert result.exit_code == 1
    clean = tmp_path / "clean"
    clean.mkdir()
    for i in range(3):
        write(clean / f"n{i}.json", base_report(host=f"n{i}"))
    files = sorted(str(p) for p in clean.iterdir())
    assert runner.invoke(fleet_command, [*files, "--fail-on-difference"]).exit_code == 0


def test_fleet_json_and_markdown(runner: CliRunner, tmp_path: Path) -> None:
    path = str(_fleet(tmp_path))
    data = json.loads(runner.invoke(fleet_command, [path, "--format", "json"]).output)
    assert data["summary"] == {
        "nodes": 6,
        "unreadable": 1,
        "differing": 1,
        "failing": 0,
        "outliers": 2,
    }
    assert data["majority"]["driver"] == "580.159.04"
    assert {o["host"] for o in data["outliers"]} == {"node04"}
    md = runner.invoke(fleet_command, [path, "--format", "markdown"]).output
    assert "| node02 | NVIDIA driver | 570.195.03 | 580.159.04 |" in md
    assert "### Unreadable reports" in md


def test_fleet_with_failing_rule_and_big_fleet_lists_only_flagged(runner: CliRunner, tmp_path: Path) -> None:
    for i in range(60):
        report = base_report(host=f"n{i:02d}")
        if i == 42:
            report = failing_rule(report)
        write(tmp_path / f"n{i:02d}.json", report)
    out = runner.invoke(fleet_command, [str(tmp_path)]).output
    assert "Nodes with findings (1 of 60" in out and "CD310 (GPU 0)" in out
    assert "n41" not in out
    out_all = runner.invoke(fleet_command, [str(tmp_path), "--all-nodes"]).output
    assert "n41" in out_all


def test_fleet_nothing_readable_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("")
    result = runner.invoke(fleet_command, [str(tmp_path)])
    assert result.exit_code == 2
    assert "no readable report" in result.output and "a.json: empty file" in result.output


def test_commands_are_registered_in_the_cli(runner: CliRunner, pair: tuple[Path, Path]) -> None:
    from cuda_doctor.cli import cli

    result = runner.invoke(cli, ["diff", *map(str, pair), "--format", "json"])
    assert result.exit_code == 1 and json.loads(result.output)["worse"] is True
    assert runner.invoke(cli, ["fleet", str(pair[0].parent)]).exit_code == 0


def test_fleet_names_every_unreadable_entry_of_a_folder_and_compares_the_rest(tmp_path: Path) -> None:
    """As a real process: a dangling symlink, a symlink loop, a FIFO, a folder and a file of
    100000 ``[`` among the reports are each named with the reason; the others are compared."""
    import os
    import subprocess
    import sys

    nodes = tmp_path / "nodes"
    nodes.mkdir()
    for index in range(3):
        write(nodes / f"node{index}.json", base_report(host=f"gpu-node-{index:02d}"))
    (nodes / "deep.json").write_text("[" * 100_000, encoding="utf-8")
    (nodes / "dangling.json").symlink_to("gone.json")
    (nodes / "loop.json").symlink_to("loop.json")
    os.mkfifo(nodes / "fifo.json")  # no writer: reading it would wait for ever
    (nodes / "folder.json").mkdir()
    (nodes / "notes.txt").write_text("not a report, not a *.json: not listed", encoding="utf-8")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cuda-doctor")), "fleet", str(nodes), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert sorted(node["host"] for node in data["nodes"]) == ["gpu-node-00", "gpu-node-01", "gpu-node-02"]
    unreadable = {Path(entry["path"]).name: entry["reason"] for entry in data["errors"]}
    assert unreadable == {
        "dangling.json": "cannot read: a symlink to gone.json, which does not exist",
        "deep.json": "not a cuda-doctor report (JSON nested too deeply to read)",
        "fifo.json": "not a regular file (a FIFO), not a report file",
        "folder.json": "is a directory, not a report file",
        "loop.json": "cannot read: a symlink loop (too many levels of symbolic links)",
    }

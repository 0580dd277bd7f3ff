"""``diff`` of reports with many GPUs: GPUs in their order, and what many GPUs share said once."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from compare_reports import _result, base_report, write

from cuda_doctor.cli import cli
from cuda_doctor.compare.diff import diff_reports, rule_groups
from cuda_doctor.compare.gpus import gpus_text, index_ranges, natural_key
from cuda_doctor.core.reportfile import load_report

PER_GPU = (("CD310", "No pending retired pages"), ("CD709", "Matmul throughput is what this GPU model should reach"))


def with_per_gpu_results(report: dict[str, Any], status: str = "pass") -> dict[str, Any]:
    """A report with a result of each per-GPU rule for each of its GPUs, as a real check has."""
    out = copy.deepcopy(report)
    out["results"] = [r for r in out["results"] if r["subject"] is None]
    for i in range(out["facts"]["values"]["gpu.count"]):
        for rule, title in PER_GPU:
            out["results"].append(_result(rule, title, "health", status, f"GPU {i} is fine", subject=f"GPU {i}"))
    return out


def diff_text(tmp_path: Path, before: dict[str, Any], after: dict[str, Any], *options: str) -> tuple[int, str]:
    a, b = write(tmp_path / "a.json", before), write(tmp_path / "b.json", after)
    done = CliRunner().invoke(cli, ["diff", str(a), str(b), *options], env={"COLUMNS": "200"}, catch_exceptions=False)
    return done.exit_code, done.output


def test_index_ranges_and_natural_order() -> None:
    assert index_ranges([3, 1, 2, 7, 9, 10, 11]) == "1–3, 7, 9–11"
    assert index_ranges(range(0, 40, 2), shown=3) == "0, 2, 4, and 17 more"
    assert gpus_text([4]) == "GPU 4" and gpus_text([1, 2, 3]) == "GPU 1–3 (3 GPUs)"
    assert sorted(["GPU 10", "GPU 2", "GPU 100", "GPU 1"], key=natural_key) == ["GPU 1", "GPU 2", "GPU 10", "GPU 100"]


def test_one_against_three_hundred_gpus_is_a_summary(tmp_path: Path) -> None:
    one, many = with_per_gpu_results(base_report(gpus=1)), with_per_gpu_results(base_report(gpus=300))
    code, out = diff_text(tmp_path, one, many)
    assert code == 0
    assert "! 299 GPUs only in AFTER" in out and "GPUs 1–299, all NVIDIA H200" in out
    assert "-v lists every GPU's line" in out
    lines = out.splitlines()
    assert len(lines) < 60, out
    rows = [line for line in lines if "CD310" in line or "CD709" in line]
    assert len(rows) == 2 and all("GPU 1–299 (299 GPUs)" in row and "each GPU is fine" in row for row in rows)
    assert "GPU 1–299 (299 GPUs) convolution: unknown → yes" in out
    assert sum(line.lstrip().startswith("1–299 ") for line in lines) == 6  # one row per figure
    _, every = diff_text(tmp_path, one, many, "--all")
    assert sum("CD310" in line for line in every.splitlines()) == 299
    _, markdown = diff_text(tmp_path, one, many, "--format", "markdown")
    assert "| CD310 | GPU 1–299 (299 GPUs) | — | pass |" in markdown and len(markdown.splitlines()) < 80


def test_every_gpu_stays_in_json(tmp_path: Path) -> None:
    one, many = with_per_gpu_results(base_report(gpus=1)), with_per_gpu_results(base_report(gpus=300))
    _, out = diff_text(tmp_path, one, many, "--format", "json")
    document = json.loads(out)
    assert len([r for r in document["rules"] if r["rule"] == "CD310"]) == 299
    (only,) = document["gpus_only"]
    assert (only["side"], only["gpus"][:2], len(only["gpus"]), only["models"]) == (
        "after",
        [1, 2],
        299,
        [["NVIDIA H200", 299]],
    )


def test_gpus_in_their_order_and_a_few_listed_one_by_one(tmp_path: Path) -> None:
    before = with_per_gpu_results(base_report(gpus=12))
    after = copy.deepcopy(before)
    for result in after["results"]:  # two GPUs fail, GPU 10 before GPU 2 as text would sort them
        if result["rule"] == "CD310" and result["subject"] in ("GPU 10", "GPU 2"):
            result["status"], result["message"] = "fail", f"{result['subject']} has retired pages pending"
    diff = diff_reports(load_report(write(tmp_path / "a.json", before)), load_report(write(tmp_path / "b.json", after)))
    assert [r.subject for r in diff.rules] == ["GPU 2", "GPU 10"]
    assert [len(group.members) for group in rule_groups(diff)] == [1, 1]  # two are not "many"
    code, out = diff_text(tmp_path, before, after)
    assert code == 1
    assert "GPU 2 has retired pages pending" in out and "GPU 10 has retired pages pending" in out
    # the figures, within noise on all twelve GPUs, are one row each
    assert sum(line.lstrip().startswith("0–11 ") and "within noise" in line for line in out.splitlines()) == 6


def test_the_same_failure_on_many_gpus_is_one_line_naming_them(tmp_path: Path) -> None:
    before = with_per_gpu_results(base_report(gpus=16))
    after = copy.deepcopy(before)
    failing = {1, 2, 3, 7, 12}
    for result in after["results"]:
        index = int(result["subject"][4:]) if result["subject"] else -1
        if result["rule"] == "CD310" and index in failing:
            result["status"], result["message"] = "fail", f"GPU {index} has retired pages pending"
    code, out = diff_text(tmp_path, before, after)
    assert code == 1
    (row,) = [line for line in out.splitlines() if "CD310" in line]
    assert "GPU 1–3, 7, 12 (5 GPUs)" in row and "each GPU has retired pages pending" in row
    assert "worse: 5 rules newly failing" in out

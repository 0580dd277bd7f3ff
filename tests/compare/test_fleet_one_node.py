"""One 8-GPU node's own report with one GPU degraded: the outlier is caught by CD805 when the
report is judged again, and by ``cuda-doctor fleet`` of that one report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from compare_reports import base_report, slower_gpu, write

from cuda_doctor.cli import cli as main
from cuda_doctor.compare.fleet import compare_fleet
from cuda_doctor.core.reportfile import load_many


def _node(tmp_path: Path, **degrade: Any) -> Path:
    report = base_report(host="hgx-01", gpus=8)
    if degrade:
        report = slower_gpu(report, **degrade)
    path = tmp_path / "hgx-01.json"
    write(path, report)
    return path


@pytest.mark.parametrize(
    ("degrade", "metric"),
    [
        ({"gpu": 5, "factor": 0.6, "metrics": ("bf16_tflops",)}, "bf16_tflops"),
        ({"gpu": 2, "factor": 0.3, "metrics": ("h2d_pinned_gbps",)}, "h2d_pinned_gbps"),
    ],
)
def test_fleet_of_one_node_names_the_degraded_gpu(tmp_path: Path, degrade: dict[str, Any], metric: str) -> None:
    reports, errors = load_many([_node(tmp_path, **degrade)])
    fleet = compare_fleet(reports, errors)
    assert [(o.host, o.gpu, o.metric, o.direction) for o in fleet.outliers] == [
        ("hgx-01", degrade["gpu"], metric, "slow")
    ]
    group = next(s for s in fleet.stats if s.metric == metric)
    assert (group.gpu_model, group.count) == ("NVIDIA H200", 8)  # one report's 8 GPUs form the group


def test_a_healthy_node_has_no_outlier(tmp_path: Path) -> None:
    reports, errors = load_many([_node(tmp_path)])
    assert compare_fleet(reports, errors).outliers == ()


def test_the_same_report_judged_again_warns_in_cd805(tmp_path: Path) -> None:
    path = _node(tmp_path, gpu=5, factor=0.6, metrics=("bf16_tflops",))
    result = CliRunner().invoke(
        main, ["check", "--facts", str(path), "--select", "CD805", "--format", "json", "--fail-on", "warning"]
    )
    report = json.loads(result.output)
    (cd805,) = [r for r in report["results"] if r["rule"] == "CD805"]
    assert cd805["status"] == "warn"
    assert "GPU 5 (NVIDIA H200): bf16 matmul" in cd805["message"] and "(0.60x)" in cd805["message"]
    assert result.exit_code == 1


def test_fleet_command_on_the_one_report(tmp_path: Path) -> None:
    path = _node(tmp_path, gpu=5, factor=0.6, metrics=("bf16_tflops",))
    result = CliRunner().invoke(main, ["fleet", str(path)])
    assert "hgx-01" in result.output and "GPU 5" in result.output, result.output

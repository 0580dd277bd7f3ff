from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from compare_reports import (
    base_report,
    failing_rule,
    other_driver,
    other_torch,
    scaled,
    slower_gpu,
    write,
)

from cuda_doctor.compare.fleet import (
    FLEET_FIELDS,
    Fleet,
    _deviations,
    _judge,
    _median,
    _unremarkable,
    compare_fleet,
)
from cuda_doctor.compare.keys import METRICS, Metric
from cuda_doctor.core.reportfile import load_many

WOBBLE = (1.0, 1.01, 0.99, 1.02, 0.98, 1.005, 0.995, 1.015)


def _fleet_dir(tmp_path: Path, n: int = 12, **changes: Any) -> Path:
    """n 8-GPU H200 nodes with run-to-run wobble; ``changes`` maps host → variant function."""
    for i in range(1, n + 1):
        host = f"node{i:02d}"
        report = scaled(base_report(host=host, gpus=8), WOBBLE[i % len(WOBBLE)])
        if host in changes:
            report = changes[host](report)
        write(tmp_path / f"{host}.json", report)
    return tmp_path


def _compare(*paths: Path) -> Fleet:
    reports, errors = load_many(paths)
    return compare_fleet(reports, errors)


def test_uniform_fleet(tmp_path: Path) -> None:
    fleet = _compare(_fleet_dir(tmp_path))
    assert fleet.uniform
    assert fleet.majority_count == 12 and not fleet.majority_tied
    assert fleet.majority is not None
    assert (fleet.majority.driver, fleet.majority.torch, fleet.majority.nccl) == (
        "580.159.04",
        "2.11.0+cu130",
        "2.28.9",
    )
    assert (fleet.majority.gpu_model, fleet.majority.gpu_count) == ("NVIDIA H200", 8)
    bf16 = next(s for s in fleet.stats if s.metric == "bf16_tflops")
    assert bf16.count == 96 and bf16.gpu_model == "NVIDIA H200"


def test_nodes_that_differ_are_named_with_what_differs(tmp_path: Path) -> None:
    fleet = _compare(
        _fleet_dir(
            tmp_path,
            node03=other_driver,
            node08=lambda r: other_torch(r, nccl="2.28.9"),
        )
    )
    assert fleet.majority_count == 10
    diffs = {d.host: {f.field: (f.value, f.majority) for f in d.differences} for d in fleet.differing}
    assert diffs == {
        "node03": {"driver": ("570.195.03", "580.159.04"), "cuda_driver": ("12.8", "13.0")},
        "node08": {"torch": ("2.10.0+cu128", "2.11.0+cu130"), "torch_cuda": ("12.8", "13.0")},
    }
    assert not fleet.outliers


def test_gpu_count_difference(tmp_path: Path) -> None:
    _fleet_dir(tmp_path, n=4)
    write(tmp_path / "node05.json", base_report(host="node05", gpus=7))
    fleet = _compare(tmp_path)
    (d,) = fleet.differing
    assert d.host == "node05"
    assert [(f.field, f.value, f.majority) for f in d.differences] == [("gpu_count", 7, 8)]


def test_failing_rules_per_node(tmp_path: Path) -> None:
    fleet = _compare(_fleet_dir(tmp_path, node07=failing_rule))
    assert [(n.host, n.failing) for n in fleet.failing] == [("node07", ("CD310 (GPU 0)",))]
    assert not fleet.differing and not fleet.uniform


def test_one_slow_gpu_is_an_outlier_by_robust_z(tmp_path: Path) -> None:
    fleet = _compare(_fleet_dir(tmp_path, node05=lambda r: slower_gpu(r, 0.85, gpu=4)))
    found = {(o.host, o.gpu, o.metric, o.direction) for o in fleet.outliers}
    assert found == {
        ("node05", 4, "bf16_tflops", "slow"),
        ("node05", 4, "fp16_tflops", "slow"),
    }
    (bf16,) = [o for o in fleet.outliers if o.metric == "bf16_tflops"]
    assert bf16.z is not None and bf16.z < -3.5
    assert 0.83 < bf16.ratio < 0.87  # 0.85 against a median near the recorded 768.6


def test_wobble_within_noise_is_not_an_outlier_even_when_mad_is_tiny(tmp_path: Path) -> None:
    # Identical figures except one GPU 3% low: z is huge, but 3% is inside the 5% band.
    for i in range(10):
        report = base_report(host=f"n{i}")
        if i == 0:
            report = slower_gpu(report, 0.97, metrics=("bf16_tflops",))
        write(tmp_path / f"n{i}.json", report)
    fleet = _compare(tmp_path)
    assert not fleet.outliers


def test_mad_zero_still_flags_a_much_slower_gpu(tmp_path: Path) -> None:
    for i in range(6):
        report = base_report(host=f"n{i}")
        if i == 2:
            report = slower_gpu(report, 0.5, metrics=("h2d_pinned_gbps",))
        write(tmp_path / f"n{i}.json", report)
    fleet = _compare(tmp_path)
    (o,) = fleet.outliers
    assert (o.host, o.metric, o.z) == ("n2", "h2d_pinned_gbps", None)
    assert o.ratio == o.value / o.median


def test_outliers_only_within_the_same_gpu_model(tmp_path: Path) -> None:
    # Three slower H100 nodes are their own group, not outliers against the H200s.
    _fleet_dir(tmp_path, n=6)
    for i in range(3):
        report = slower_gpu(base_report(host=f"h100-{i}", gpus=8), 0.5, gpu=0)
        report = scaled(report, 0.6)
        for g in range(8):
            report["facts"]["values"][f"gpu[{g}].name"] = "NVIDIA H100 80GB HBM3"
        report["facts"]["values"]["torch.device_names"] = ["NVIDIA H100 80GB HBM3"] * 8
        write(tmp_path / f"h100-{i}.json", report)
    fleet = _compare(tmp_path)
    models = {s.gpu_model for s in fleet.stats}
    assert models == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    # GPU 0 of every H100 node is 0.5× its peers: flagged within the H100 group.
    assert {(o.host, o.gpu, o.gpu_model) for o in fleet.outliers} == {
        (f"h100-{i}", 0, "NVIDIA H100 80GB HBM3") for i in range(3)
    }
    assert {d.host for d in fleet.differing} == {"h100-0", "h100-1", "h100-2"}


def test_bad_files_are_named_and_the_rest_still_compared(tmp_path: Path) -> None:
    _fleet_dir(tmp_path, n=5, node02=other_driver)
    good = (tmp_path / "node01.json").read_text()
    (tmp_path / "node06.json").write_text(good[: len(good) // 2])
    (tmp_path / "node07.json").write_text("nvidia-smi: command not found\n")
    new = base_report(host="node08")
    new["schema_version"] = 2
    write(tmp_path / "node08.json", new)
    fleet = _compare(tmp_path)
    assert [n.host for n in fleet.nodes] == ["node01", "node02", "node03", "node04", "node05"]
    reasons = {Path(e.path).name: e.reason for e in fleet.errors}
    assert set(reasons) == {"node06.json", "node07.json", "node08.json"}
    assert "truncated" in reasons["node06.json"]
    assert "not JSON" in reasons["node07.json"]
    assert "newer" in reasons["node08.json"]
    assert [d.host for d in fleet.differing] == ["node02"]


def test_tie_and_duplicates(tmp_path: Path) -> None:
    write(tmp_path / "a.json", base_report(host="a"))
    write(tmp_path / "b.json", other_driver(base_report(host="b")))
    write(tmp_path / "b-again.json", other_driver(base_report(host="b")))
    write(tmp_path / "c.json", base_report(host="c"))
    fleet = _compare(tmp_path)
    assert fleet.majority_tied and fleet.majority_count == 2
    assert fleet.duplicates == ("b",)


def test_empty_fleet() -> None:
    fleet = compare_fleet([])
    assert fleet.majority is None and fleet.nodes == () and fleet.uniform


def test_two_nodes_are_too_few_for_outliers(tmp_path: Path) -> None:
    write(tmp_path / "a.json", base_report(host="a"))
    write(tmp_path / "b.json", slower_gpu(base_report(host="b"), 0.5))
    fleet = _compare(tmp_path)
    assert not fleet.outliers
    assert {s.count for s in fleet.stats} == {2}


def test_the_fields_a_fleet_keeps_give_the_same_comparison(tmp_path: Path) -> None:
    def smoke_check_only(report: dict[str, Any]) -> dict[str, Any]:
        # GPU 0 ran only the pass/fail checks: its figures are missing, GPU 1's must still count
        values = report["facts"]["values"]
        for m in METRICS:
            values.pop(f"smoke[0].{m.key}", None)
        assert any(k.startswith("smoke[0].") for k in values) and "smoke[1].bf16_tflops" in values
        return report

    _fleet_dir(
        tmp_path,
        node03=other_driver,
        node05=failing_rule,
        node07=lambda r: slower_gpu(r, 0.6, gpu=3),
        node09=smoke_check_only,
        node11=lambda r: failing_rule(r, status="error"),
    )
    reports, errors = load_many([tmp_path])
    kept, kept_errors = load_many([tmp_path], FLEET_FIELDS)
    assert compare_fleet(kept, kept_errors) == compare_fleet(reports, errors)
    assert compare_fleet(kept, kept_errors, noise=0.0) == compare_fleet(reports, errors, noise=0.0)


@pytest.mark.parametrize("higher_is_better", [True, False])
@pytest.mark.parametrize("noise", [0.0, 0.02, 0.05, 0.3])
def test_the_band_left_unjudged_holds_no_outlier(higher_is_better: bool, noise: float) -> None:
    metric = Metric("x", "x", "u", higher_is_better)
    rng = random.Random(f"{higher_is_better}{noise}")
    for _ in range(300):
        median = rng.choice([1.0, 7.64, 768.6, 1e-3, 55.2])
        mad = rng.choice([0.0, 1e-12, median * 1e-4, median * 0.01, median * 0.2])
        low, high = _unremarkable(median, mad, noise, metric)
        for _ in range(200):
            value = median * rng.uniform(0.0, 2.5)
            if low <= value <= high:
                assert _judge(value, median, mad, noise, metric) is None, (value, median, mad, noise)
        for edge in (low, high) if low <= high else ():  # right at the band's edges too
            if 0 < edge < float("inf"):
                assert _judge(edge, median, mad, noise, metric) is None


def test_median_and_mad_of_sorted_figures_are_the_statistics_modules() -> None:
    rng = random.Random(7)
    for n in (1, 2, 3, 4, 7, 100, 101):
        values = sorted(round(rng.gauss(768.6, 5), rng.choice([0, 1, 3])) for _ in range(n))
        median = statistics.median(values)
        assert _median(values) == median
        assert _median(_deviations(values, median)) == statistics.median(abs(v - median) for v in values)

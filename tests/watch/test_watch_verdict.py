"""Verdicts on recorded-style sample series (tests/watch/fixtures, made by generate.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cuda_doctor.report.watch import json as watch_json
from cuda_doctor.report.watch import markdown as watch_markdown
from cuda_doctor.report.watch import text as watch_text
from cuda_doctor.watch.samples import GpuInfo, Sample, Series, reason_names
from cuda_doctor.watch.verdict import analyse, count_gaps, warmup_end

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load(name: str) -> Series:
    return Series.from_dict(json.loads((FIXTURES / f"{name}.json").read_text()))


@pytest.mark.parametrize(
    ("name", "kind", "fix_word"),
    [
        ("starved", "input_bound", "num_workers"),
        ("gpu_bound", "gpu_bound", "autocast"),
        ("transfer_bound", "transfer_bound", "pin_memory"),
        ("thermal", "thermal_limited", "cooling"),
    ],
)
def test_recorded_series_get_the_right_verdict(name: str, kind: str, fix_word: str) -> None:
    analysis = analyse(load(name))
    assert analysis.verdict.kind == kind
    assert analysis.verdict.evidence
    assert any(fix_word in fix for fix in analysis.verdict.fixes)


def test_starved_run_evidence_shows_low_use_and_gaps() -> None:
    gpu = analyse(load("starved")).gpus[0]
    assert gpu.steady is not None and gpu.steady.mean_sm_util is not None
    assert gpu.steady.mean_sm_util < 40
    assert gpu.steady.gaps >= 3
    assert gpu.steady.under_busy_share is not None and gpu.steady.under_busy_share > 0.7
    fixes = " ".join(analyse(load("starved")).verdict.fixes)
    for lever in ("pin_memory", "persistent_workers", "prefetch_factor", "preprocessing"):
        assert lever in fixes


def test_warm_up_is_reported_apart_from_the_steady_state() -> None:
    gpu = analyse(load("gpu_bound")).gpus[0]
    assert gpu.warmup is not None and gpu.steady is not None
    assert gpu.warmup.mean_sm_util == 0  # the import, before the GPU is touched
    assert gpu.steady.start_s == gpu.warmup.end_s
    assert gpu.steady.mean_sm_util is not None and gpu.steady.mean_sm_util > 95


def test_gpu_bound_notes_the_power_cap_and_the_memory_headroom() -> None:
    gpu = analyse(load("gpu_bound")).gpus[0]
    assert gpu.throttle_shares.get("sw_power_cap", 0) > 0.2
    assert [f.kind for f in gpu.findings] == ["power_capped"]
    assert gpu.peak_mem_share is not None and gpu.peak_mem_share < 0.6
    assert any("larger batch" in f.lower() for f in gpu.verdict.fixes)


def test_series_round_trip_through_json() -> None:
    series = load("thermal")
    assert Series.from_dict(json.loads(json.dumps(series.to_dict()))) == series


def test_no_nvml_gives_no_data_but_a_report() -> None:
    series = Series(interval_s=1.0, duration_s=3.0, nvml_error="NVML is not available: x")
    analysis = analyse(series)
    assert analysis.verdict.kind == "no_data"
    assert "the command still ran" in analysis.verdict.title
    assert "NVML is not available" in watch_text.render(series, analysis)


def test_a_gpu_the_command_never_used_is_not_judged() -> None:
    series = load("starved")
    other = tuple(replace(s, gpu=1, sm_util=0.0, child_on_gpu=False) for s in series.samples)
    two = replace(series, gpus=(*series.gpus, GpuInfo(index=1, name="NVIDIA H200")), samples=series.samples + other)
    analysis = analyse(two)
    assert analysis.verdict.kind == "input_bound"
    assert analysis.gpus[1].verdict.kind == "unused"


def test_warmup_end_rules() -> None:
    quiet = [Sample(t=float(t), gpu=0, sm_util=0.0) for t in range(100)]
    assert warmup_end(quiet, 100.0, 1.0) == 10.0  # 10% of the run
    assert warmup_end(quiet * 5, 500.0, 1.0) == 30.0  # capped at 30 s
    busy_from_3 = [Sample(t=float(t), gpu=0, sm_util=90.0 if t >= 3 else 0.0) for t in range(100)]
    assert warmup_end(busy_from_3, 100.0, 1.0) == 3.0  # utilisation stays high from 3 s


def test_count_gaps_counts_idle_between_bursts() -> None:
    assert count_gaps([0, 0, 50, 0, 0, 60, 2, 70, 80]) == 2
    assert count_gaps([90, 95, 99]) == 0


def test_reason_names_decode_the_bitmask() -> None:
    assert reason_names(0x4 | 0x40) == ("sw_power_cap", "hw_thermal")
    assert reason_names(None) == ()


def test_reporters_render_every_fixture() -> None:
    for name in ("starved", "gpu_bound", "transfer_bound", "thermal"):
        series = load(name)
        analysis = analyse(series)
        text = watch_text.render(series, analysis)
        assert "Verdict:" in text and any(ch in text for ch in "▁▂▃▄▅▆▇█")
        assert "**Verdict:" in watch_markdown.render(series, analysis)
        data = json.loads(watch_json.render(series, analysis, "host"))
        assert data["schema"] == "cuda-doctor/watch-report"
        assert data["analysis"]["verdict"]["kind"] == analysis.verdict.kind
        assert Series.from_dict(data["series"]) == series


@pytest.mark.parametrize(("name", "kind"), [("h200_starved", "input_bound"), ("h200_gpu_bound", "gpu_bound")])
def test_series_recorded_on_an_h200(name: str, kind: str) -> None:
    # benchmarks/watch_scripts/{starved,gpu_bound}.py watched on a 2×H200 machine
    analysis = analyse(load(name))
    assert analysis.verdict.kind == kind
    assert [g.used_by_command for g in analysis.gpus] == [True, False]
    assert analysis.gpus[1].verdict.kind == "unused"

"""Measured figures against gpu_expected.toml, judged by the CD7xx rules.

The H200 figures are the ones recorded on a real H200 (fixtures/smoke/h200-torch.txt).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result, Status
from cuda_doctor.core.rules import judge, load_rules
from cuda_doctor.smoke.expected import NO_CAUSE, derive, expected_figures, find_row
from cuda_doctor.tables import load_table

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "smoke" / "h200-torch.txt"


def recorded_h200() -> dict[str, float]:
    text = RECORDING.read_text()

    def number(pattern: str) -> float:
        match = re.search(pattern, text)
        assert match, pattern
        return float(match.group(1))

    return {
        "fp32_tflops": number(r"torch\.float32 matmul .* TFLOPs ([\d.]+)"),
        "fp16_tflops": number(r"torch\.float16 matmul .* TFLOPs ([\d.]+)"),
        "bf16_tflops": number(r"torch\.bfloat16 matmul .* TFLOPs ([\d.]+)"),
        "h2d_pinned_gbps": number(r"H2D pinned GB/s ([\d.]+)"),
        "h2d_pageable_gbps": number(r"H2D pageable GB/s ([\d.]+)"),
        "launch_us": number(r"launch_us ([\d.]+)"),
    }


def smoke_facts(figures: dict[str, float], **extra: Any) -> Facts:
    facts = Facts()
    base = {
        "name": "NVIDIA H200",
        "capability": "9.0",
        "uuid": "GPU-3d95cf99-d22a-5850-a342-8583fdfbb084",
        "error": None,
        "error_step": None,
        "bf16_native": True,
        "pcie_gen_under_load": 5,
        "pcie_width_under_load": 16,
        "pcie_gen_max": 5,
        "pcie_width_max": 16,
        "clock_event_reason_names_under_load": [],
        "power_limit_w": 700.0,
        "power_default_limit_w": 700.0,
        "other_process_count": 0,
        **{k: round(v, 1) for k, v in figures.items()},
        **extra,
    }
    for key, value in base.items():
        facts.set(f"smoke[0].{key}", value)
    facts.set("smoke[0].amp_speedup_bf16", round(figures["bf16_tflops"] / figures["fp32_tflops"], 1))
    return facts


def results_for(facts: Facts, *ids: str) -> dict[str, Result]:
    derive(facts)
    rules = [r for r in load_rules() if r.id in ids]
    return {r.rule_id: r for r in judge(rules, facts)}


def test_rows_match_device_names_narrowest_first() -> None:
    table = load_table("gpu_expected")
    assert find_row(table, "NVIDIA H200")["model"] == "H200"  # type: ignore[index]
    assert find_row(table, "NVIDIA H200 NVL")["model"] == "H200 NVL"  # type: ignore[index]
    assert find_row(table, "NVIDIA H100 80GB HBM3")["model"] == "H100 SXM"  # type: ignore[index]
    assert find_row(table, "NVIDIA L40S")["model"] == "L40S"  # type: ignore[index]
    assert find_row(table, "NVIDIA L4")["model"] == "L4"  # type: ignore[index]
    assert find_row(table, "NVIDIA A100-SXM4-80GB")["model"] == "A100"  # type: ignore[index]
    assert find_row(table, "NVIDIA A10")["model"] == "A10"  # type: ignore[index]
    assert find_row(table, "Tesla T4")["model"] == "T4"  # type: ignore[index]
    assert find_row(table, "Some Future GPU") is None


def test_every_row_cites_its_source_and_kind() -> None:
    table = load_table("gpu_expected")
    for row in table["gpu"]:
        assert row["kind"] in ("measured", "datasheet")
        assert row["source"].startswith("http" if row["kind"] == "datasheet" else "measured: ")
        assert row["source"]


def test_datasheet_rows_are_scaled_by_the_achievable_factor() -> None:
    table = load_table("gpu_expected")
    row = find_row(table, "NVIDIA A100-SXM4-80GB")
    assert row is not None
    figures = expected_figures(table, row)
    assert figures["bf16_tflops"] == pytest.approx(312.0 * table["achievable"]["tensor_matmul"], abs=0.1)
    assert figures["h2d_pinned_gbps"] == pytest.approx(31.5 * table["achievable"]["h2d_pinned"], abs=0.1)
    assert figures["launch_us"] == table["defaults"]["launch_us"]


def test_recorded_h200_figures_pass_at_100_percent() -> None:
    facts = smoke_facts(recorded_h200())
    results = results_for(facts, "CD709", "CD710", "CD711", "CD712")
    assert facts.get("derived.smoke[0].bf16_ratio") == 1.0
    assert facts.get("derived.smoke[0].matmul_percent_min") == 100
    assert facts.get("derived.smoke[0].slow_causes") == [NO_CAUSE]
    assert results["CD709"].status is Status.PASS
    assert results["CD710"].status is Status.PASS
    assert results["CD711"].status is Status.PASS
    assert results["CD712"].status is Status.INFO
    assert results["CD712"].message.startswith("bf16 matmul ran 15.1× faster than fp32 on this GPU")


def test_forty_percent_warns_with_the_causes_seen_under_load() -> None:
    slow = {k: v * 0.4 if k != "launch_us" else v for k, v in recorded_h200().items()}
    facts = smoke_facts(
        slow,
        clock_event_reason_names_under_load=["sw_power_cap", "sync_boost"],
        pcie_gen_under_load=3,
        power_limit_w=350.0,
        other_process_count=2,
        other_process_mib=40960,
    )
    results = results_for(facts, "CD709", "CD710")
    matmul = results["CD709"]
    assert matmul.status is Status.WARN
    assert "40% of the" in matmul.message
    assert "the power limit was reached (sw_power_cap)" in matmul.message
    assert "PCIe link ran at gen 3 x16 during the copy" in matmul.message
    assert "power limit set to 350 W (default 700 W)" in matmul.message
    assert "2 other process(es) on the GPU using 40960 MiB" in matmul.message
    assert "sync_boost" not in matmul.message  # not a slowdown
    assert results["CD710"].status is Status.WARN


def test_unknown_gpu_model_leaves_the_comparison_unknown() -> None:
    facts = smoke_facts(recorded_h200(), name="Some Future GPU")
    results = results_for(facts, "CD709")
    assert results["CD709"].status is Status.UNKNOWN
    assert "no expected figures for Some Future GPU" in results["CD709"].message


def test_clock_reasons_fall_back_to_the_nvml_facts_of_the_same_gpu() -> None:
    facts = smoke_facts(recorded_h200())
    del facts.values["smoke[0].clock_event_reason_names_under_load"]
    facts.set("gpu[3].uuid", "GPU-3d95cf99-d22a-5850-a342-8583fdfbb084")
    facts.set("gpu[3].clock_event_reason_names", ["hw_thermal"])
    facts.set("gpu[3].mig_enabled", True)
    derive(facts)
    causes = facts.get("derived.smoke[0].slow_causes")
    assert causes == [
        "clocks held down: thermal slowdown by the hardware (hw_thermal)",
        "MIG is enabled: the CUDA device is a slice of the GPU",
    ]

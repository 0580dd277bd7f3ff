"""docs/multi-gpu.md: every multi-GPU rule and the fabric rule are on the page, with the figures
and defaults the code has."""

from __future__ import annotations

from pathlib import Path

from cuda_doctor.core.rules import load_rules
from cuda_doctor.nccl import runner
from cuda_doctor.tables import load_table

REPO = Path(__file__).resolve().parents[2]
PAGE = " ".join((REPO / "docs" / "multi-gpu.md").read_text(encoding="utf-8").split())  # lines joined


def test_every_multi_gpu_rule_and_the_fabric_rule_are_on_the_page() -> None:
    ids = [r.id for r in load_rules() if r.category == "multi-gpu" or r.id == "CD103"]
    assert len(ids) >= 7
    assert [i for i in ids if i not in PAGE] == []


def test_the_page_says_what_the_runner_sets_and_the_table_expects() -> None:
    for name, value in runner.NVLS_OFF.items():
        assert f"`{name}={value}`" in PAGE or f"{name}={value}" in PAGE, name
    (nvswitch,) = load_table("interconnect_expected")["nvswitch"]
    assert f"{nvswitch['busbw_gbps']:g} GB/s" in PAGE and f"{nvswitch['busbw_nvls_gbps']:g} GB/s" in PAGE
    assert nvswitch["measured_here"] is False and "no 8-GPU node was at hand" in PAGE
    limits = load_table("interconnect_expected")["nvlink_errors"]
    assert f"from {limits['replay']} replay or {limits['recovery']} recovery error and from {limits['crc']} CRC" in PAGE


def test_the_error_text_users_paste_is_on_the_page() -> None:
    assert "system not yet initialized" in PAGE and "cudaErrorSystemNotReady" in PAGE


def test_the_readme_links_the_page() -> None:
    assert "(docs/multi-gpu.md)" in (REPO / "README.md").read_text(encoding="utf-8")


def test_the_calls_per_gpu_on_the_page_are_the_ones_the_test_pins() -> None:
    from tests.gpu.nvml.test_field_values import FAST_CALLS_PER_GPU

    with_links = sum(FAST_CALLS_PER_GPU.values())
    assert f"{with_links} driver calls per GPU with NVLinks ({with_links - 1} without)" in PAGE

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.results import Status
from cuda_doctor.core.rules import judge_rule, load_rule_file
from cuda_doctor.nccl.derive import derive
from tests.nccl.conftest import FIXTURES, REPO


def _facts(name: str, **extra: object) -> Facts:
    data = json.loads((FIXTURES / name).read_text())
    facts = Facts.from_dict({"values": data["values"], "unknown": data["unknown"]})
    facts.set("env.nccl", {"NCCL_NVLS_ENABLE": "0"})
    for key, value in extra.items():
        facts.set(key.replace("__", "."), value)
    derive(facts)
    return facts


def _status(rule_id: str, facts: Facts) -> tuple[Status, str]:
    rule = load_rule_file(Path(REPO / "rules" / f"{rule_id}.toml"))
    [result] = judge_rule(rule, facts)
    return result.status, result.message


def test_recorded_h200_pair_passes_everything() -> None:
    facts = _facts("probe-2gpu.json")
    assert facts.get("derived.nccl.expected_busbw_gbps") == 315.0
    for rule_id in ("CD801", "CD802", "CD804", "CD805"):
        status, message = _status(rule_id, facts)
        assert status is Status.PASS, (rule_id, message)


def test_recorded_p2p_disabled_run_warns_on_bandwidth_and_variable() -> None:
    facts = _facts("probe-2gpu-p2p-disabled.json", env__nccl={"NCCL_P2P_DISABLE": "1"})
    status, message = _status("CD804", facts)
    assert status is Status.WARN and "26.9 GB/s" in message
    derive_all(facts)  # the variable itself is CD402's (NCCL debugging variables), for any GPU count
    status, message = _status("CD402", facts)
    assert status is Status.WARN and "NCCL_P2P_DISABLE=1" in message


def test_recorded_one_gpu_run_is_skipped() -> None:
    facts = _facts("probe-1gpu.json")
    for rule_id in ("CD801", "CD802", "CD804", "CD805"):
        status, message = _status(rule_id, facts)
        assert status is Status.SKIPPED, rule_id
        assert message == "not applicable: one GPU (`--nccl` runs a one-rank all-reduce on it)", rule_id


def test_a_one_rank_run_passes_the_all_reduce_and_skips_the_checks_between_gpus() -> None:
    facts = _facts("probe-1gpu.json")
    for name, value in {
        "nccl.status": "ok",
        "nccl.world_size": 1,
        "nccl.sum_ok": True,
        "nccl.version": "2.28.9",
    }.items():
        facts.set(name, value)
    facts.set("nccl.device_names", ["NVIDIA H200"])
    derive(facts)
    status, message = _status("CD801", facts)
    assert status is Status.PASS and "a one-rank NCCL all-reduce (NCCL 2.28.9) initialised NCCL" in message
    for rule_id in ("CD802", "CD804", "CD805"):
        status, message = _status(rule_id, facts)
        assert status is Status.SKIPPED and "moves no data between GPUs" in message, rule_id


@pytest.mark.parametrize(
    ("status", "error"),
    [
        ("timeout", "timeout: rank 1 did not join within 90 s"),
        ("failed", "rank 0: RuntimeError: NCCL error"),
    ],
)
def test_allreduce_failures_fail(status: str, error: str) -> None:
    facts = Facts({"nccl.status": status, "nccl.error": error, "nccl.world_size": 2})
    derive(facts)
    result, message = _status("CD801", facts)
    assert result is Status.FAIL and error in message


def test_wrong_sum_fails() -> None:
    facts = _facts(
        "probe-2gpu.json",
        nccl__status="failed",
        nccl__sum_ok=False,
        nccl__error="all-reduce returned a wrong sum on rank 1",
    )
    assert _status("CD801", facts)[0] is Status.FAIL


def test_missing_p2p_on_nvlink_warns() -> None:
    facts = _facts("probe-2gpu.json", nccl__p2p={"0-1": False})
    status, message = _status("CD802", facts)
    assert status is Status.WARN and "GPU 0–1 (NV18)" in message


def test_missing_p2p_across_sockets_is_expected() -> None:
    facts = _facts("probe-2gpu.json", nccl__p2p={"0-1": False}, nccl__link_types={"0-1": "SYS"})
    assert _status("CD802", facts)[0] is Status.PASS


def test_outlier_rank_warns() -> None:
    facts = _facts(
        "probe-2gpu.json",
        nccl__per_rank_seconds=[0.0019, 0.0019, 0.0019, 0.0060],
        nccl__device_names=["NVIDIA H200"] * 4,
    )
    status, message = _status("CD805", facts)
    assert status is Status.WARN and message.startswith("slower than its identical siblings: rank 3")


def test_pcie_expectation_from_gpu_facts() -> None:
    facts = Facts(
        {
            "nccl.status": "ok",
            "nccl.busbw_peak_gbps": 10.0,
            "nccl.link_types": {"0-1": "PHB"},
            "gpu[0].pcie_gen_max": 5,
            "gpu[0].pcie_width_max": 16,
            "gpu[1].pcie_gen_max": 4,
            "gpu[1].pcie_width_max": 16,
        }
    )
    derive(facts)
    assert facts.get("derived.nccl.expected_basis").startswith("PCIe Gen4 x16")
    assert facts.get("derived.nccl.busbw_ratio") < 0.5
    assert _status("CD804", facts)[0] is Status.WARN


def test_not_run_is_skipped_with_how_to_run_it() -> None:
    facts = Facts()
    derive(facts)
    status, message = _status("CD801", facts)
    assert status is Status.SKIPPED and "with `--nccl` (check or smoke) on one GPU too" in message

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.nccl import runner
from cuda_doctor.nccl.allreduce_child import STALL_ENV
from cuda_doctor.nccl.derive import derive
from cuda_doctor.nccl.probe import NcclProbe, result_facts, visible_count
from tests.nccl.conftest import FIXTURES

MakeNvml = Callable[..., Any]


def _ctx(tmp_path: Path, python: str = "python3", nccl: bool = True, **env: str) -> ProbeContext:
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\ncat '{FIXTURES / 'topo-m.txt'}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    base = {k: v for k, v in os.environ.items() if k not in (STALL_ENV, "CUDA_VISIBLE_DEVICES")}
    base["PATH"] = f"{tmp_path}{os.pathsep}{base.get('PATH', os.defpath)}"
    base.update(env)
    return ProbeContext(env=base, python=python, smoke_timeout=5, timeout=5, nccl=nccl)


def test_applies_only_to_the_smoke_run() -> None:
    probe = NcclProbe()
    assert probe.applies(ProbeContext(smoke=True))
    assert not probe.applies(ProbeContext(fast=True))
    assert not probe.applies(ProbeContext(smoke=False))


def test_visible_count() -> None:
    assert visible_count(2, None) == 2
    assert visible_count(2, "") == 0
    assert visible_count(2, "0") == 1
    assert visible_count(4, "0,2,-1,1") == 2
    assert visible_count(2, "7") == 0
    assert visible_count(2, "GPU-98bd5244,GPU-a3493707") == 2
    assert visible_count(2, "0,0") == 0  # as the CUDA_VISIBLE_DEVICES rule reads it: a duplicate exposes none


def gpus(make_nvml: MakeNvml, count: int, **options: Any) -> Callable[[], Any]:
    """An ``nvml_loader`` giving the fake NVML with ``count`` GPUs."""
    module = make_nvml(device_count=count, **options).module()
    return lambda: module


def test_one_gpu_is_not_applicable_unless_asked_for(tmp_path: Path, make_nvml: MakeNvml) -> None:
    facts = NcclProbe(nvml_loader=gpus(make_nvml, 1)).collect(_ctx(tmp_path, nccl=False))
    assert facts.get("nccl.status") == "not_applicable"
    assert facts.get("nccl.reason") == "one GPU"
    assert facts.unknown["nccl.busbw_gbps"] == "not applicable: one GPU"


def test_cuda_visible_devices_narrows_to_one_gpu(tmp_path: Path, make_nvml: MakeNvml) -> None:
    ctx = _ctx(tmp_path, nccl=False, CUDA_VISIBLE_DEVICES="0")
    facts = NcclProbe(nvml_loader=gpus(make_nvml, 2)).collect(ctx)
    assert (facts.get("nccl.status"), facts.get("nccl.world_size")) == ("not_applicable", 1)


def test_visible_count_reads_mig_as_check_does() -> None:
    assert visible_count(2, "MIG-5c0a7b2e") == 1  # one MIG instance, its GPU not known here
    assert visible_count(2, "MIG-5c0a7b2e", mig_parents={"MIG-5c0a7b2e-6d1f": 1}) == 1
    assert visible_count(2, "MIG-5c0a7b2e", mig_parents={}) == 0  # no MIG instance on this machine
    assert visible_count(2, "0,GPU-ffff", ["GPU-3d95cf99", "GPU-a3493707"]) == 1  # real UUIDs: no such GPU


def test_a_gpu_listed_twice_is_not_applicable(tmp_path: Path, make_nvml: MakeNvml) -> None:
    facts = NcclProbe(nvml_loader=gpus(make_nvml, 2)).collect(_ctx(tmp_path, CUDA_VISIBLE_DEVICES="0,0"))
    assert (facts.get("nccl.status"), facts.get("nccl.reason")) == ("not_applicable", "no GPU visible")


def test_a_mig_instance_is_one_device(tmp_path: Path, make_nvml: MakeNvml) -> None:
    loader = gpus(make_nvml, 2, mig_devices={1: ["MIG-5c0a7b2e-6d1f-5e4a-9b3c-2f1e0d9c8b7a"]})
    facts = NcclProbe(nvml_loader=loader).collect(_ctx(tmp_path, nccl=False, CUDA_VISIBLE_DEVICES="MIG-5c0a7b2e"))
    assert (facts.get("nccl.status"), facts.get("nccl.world_size")) == ("not_applicable", 1)


def test_nvml_that_does_not_answer_in_time(tmp_path: Path, make_nvml: MakeNvml) -> None:
    probe = NcclProbe(nvml_loader=gpus(make_nvml, 2, slow={"nvmlDeviceGetCount": 2.0}))
    facts = probe.collect(_ctx(tmp_path).but(timeout=0.3))
    assert facts.unknown["nccl.status"] == "cannot count GPUs: NVML did not answer in 0.3 s"


def test_an_nvml_init_failure_is_the_reason(tmp_path: Path, make_nvml: MakeNvml) -> None:
    loader = gpus(make_nvml, 2, init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    facts = NcclProbe(nvml_loader=loader).collect(_ctx(tmp_path))
    why = "NVIDIA kernel driver not loaded (Driver Not Loaded)"
    assert facts.unknown["nccl.status"] == f"cannot count GPUs: NVML: {why}"


def test_recorded_one_gpu_run_matches() -> None:
    recorded = json.loads((FIXTURES / "probe-1gpu.json").read_text())["values"]
    assert recorded["nccl.status"] == "not_applicable" and recorded["nccl.reason"] == "one GPU"


def test_no_nvml_leaves_status_unknown_with_reason(tmp_path: Path) -> None:
    def broken() -> Any:
        raise ImportError("No module named 'pynvml'")

    facts = NcclProbe(nvml_loader=broken).collect(_ctx(tmp_path))
    assert not facts.has("nccl.status")
    assert "pynvml" in facts.unknown["nccl.status"]


def test_two_processes_end_to_end_with_gloo(torch_python: str, tmp_path: Path, make_nvml: MakeNvml) -> None:
    probe = NcclProbe(nvml_loader=gpus(make_nvml, 2), backend="gloo", sizes=(4096, 65536), iters=2, warmup=1)
    facts = probe.collect(_ctx(tmp_path, python=torch_python))
    assert facts.get("nccl.status") == "ok", facts.get("nccl.error")
    assert facts.get("nccl.sum_ok") is True
    assert facts.get("nccl.world_size") == 2
    assert set(facts.get("nccl.busbw_gbps")) == {"4096", "65536"}
    assert facts.get("nccl.busbw_peak_gbps") == max(facts.get("nccl.busbw_gbps").values())
    assert len(facts.get("nccl.per_rank_seconds")) == 2
    assert facts.get("nccl.link_types") == {"0-1": "NV18"}
    assert facts.get("nvlink[1].active_links") == 18
    assert "GPUs only" in facts.unknown["nccl.p2p"]


def test_one_gpu_with_nccl_runs_one_real_rank(torch_python: str, tmp_path: Path, make_nvml: MakeNvml) -> None:
    probe = NcclProbe(nvml_loader=gpus(make_nvml, 1), backend="gloo")
    facts = probe.collect(_ctx(tmp_path, python=torch_python, nccl=True))
    assert facts.get("nccl.status") == "ok", facts.get("nccl.error")
    assert (facts.get("nccl.world_size"), facts.get("nccl.sum_ok")) == (1, True)
    assert len(facts.get("nccl.per_rank_init_seconds")) == 1  # init_process_group really ran
    # one rank moves nothing between GPUs: no bandwidth is claimed
    assert facts.unknown["nccl.busbw_peak_gbps"] == "one rank: the all-reduce moves no data between GPUs"
    derive(facts)
    assert facts.get("derived.nccl.skip_reason") is None
    assert "one-rank all-reduce moves no data" in facts.get("derived.nccl.pair_skip_reason")


def test_two_ranks_never_share_one_gpu(tmp_path: Path, make_nvml: MakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []

    def group(python: str, world_size: int, **options: Any) -> runner.GroupResult:
        sizes.append(world_size)
        return runner.GroupResult("failed", "not run here", world_size)

    monkeypatch.setattr(runner, "run_group", group)
    NcclProbe(nvml_loader=gpus(make_nvml, 2)).collect(_ctx(tmp_path, nccl=True, CUDA_VISIBLE_DEVICES="1"))
    assert sizes == [1]  # NCCL refuses two ranks on one GPU since 2.5


def test_timeout_through_the_probe(torch_python: str, tmp_path: Path, make_nvml: MakeNvml) -> None:
    probe = NcclProbe(nvml_loader=gpus(make_nvml, 2), backend="gloo", sizes=(4096,))
    ctx = _ctx(tmp_path, python=torch_python, **{STALL_ENV: "1"}).but(smoke_timeout=-52.0)
    facts = probe.collect(ctx)  # smoke_timeout + 60 s of slack = 8 s
    assert facts.get("nccl.status") == "timeout"
    assert facts.get("nccl.error") == "timeout: rank 1 did not join within 8 s"
    assert "rank 1 did not join" in facts.unknown["nccl.sum_ok"]


def _recorded_group(wrong_rank: int | None = None) -> runner.GroupResult:
    ranks = []
    for r in (0, 1):
        event = runner.parse_events((FIXTURES / f"rank{r}.jsonl").read_text())[-1]
        row = {k: v for k, v in event.items() if k != "event"}
        if r == wrong_rank:
            row["sum_ok"] = False
        ranks.append(row)
    return runner.GroupResult("ok", None, 2, tuple(ranks), 9.0)


def test_result_facts_from_recorded_h200_ranks() -> None:
    facts = result_facts(_recorded_group())
    assert facts.get("nccl.status") == "ok"
    assert facts.get("nccl.p2p") == {"0-1": True}
    assert facts.get("nccl.version") == "2.28.9"
    assert facts.get("nccl.device_names") == ["NVIDIA H200", "NVIDIA H200"]
    assert facts.get("nccl.busbw_peak_gbps") > 200


def test_wrong_sum_is_a_failure() -> None:
    facts = result_facts(_recorded_group(wrong_rank=1))
    assert facts.get("nccl.status") == "failed"
    assert facts.get("nccl.sum_ok") is False
    assert facts.get("nccl.error") == "all-reduce returned a wrong sum on rank 1"


def test_failed_group_marks_results_unknown() -> None:
    facts = result_facts(runner.GroupResult("failed", "rank 0: RuntimeError: boom", 2))
    assert facts.get("nccl.status") == "failed"
    assert facts.unknown["nccl.busbw_gbps"] == "rank 0: RuntimeError: boom"
    assert isinstance(facts, Facts)

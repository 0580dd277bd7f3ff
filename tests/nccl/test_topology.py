from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.nccl import topology
from tests.nccl.conftest import FIXTURES

MakeNvml = Callable[..., Any]


def test_recorded_nvml_answers_match_the_fake(make_nvml: MakeNvml) -> None:
    lines = (FIXTURES / "nvml-nvlink.txt").read_text().splitlines()
    assert "0 17 state 1 version 6" in lines
    assert lines[18].startswith("0 18 ERR NVMLError_InvalidArgument")
    nvml = make_nvml(device_count=2).module()
    assert (nvml.nvmlDeviceGetNvLinkState(1000, 17), nvml.nvmlDeviceGetNvLinkVersion(1000, 17)) == (1, 6)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetNvLinkState(1000, 18)


def test_nvlink_all_links_active(make_nvml: MakeNvml) -> None:
    nvml = make_nvml(device_count=2)
    facts = topology.read_nvml(nvml.module()).facts
    assert facts.get("nvlink[0].active_links") == 18
    assert facts.get("nvlink[1].supported") is True
    assert facts.get("nvlink[1].version_raw") == 6
    assert nvml.calls.count("nvmlInit") == nvml.shutdowns == 1  # opened once, and closed


def test_nvlink_counts_inactive_links(make_nvml: MakeNvml) -> None:
    facts = topology.read_nvml(make_nvml(device_count=2, nvlinks_down=frozenset({(1, 3), (1, 4)})).module()).facts
    assert facts.get("nvlink[0].active_links") == 18
    assert facts.get("nvlink[1].active_links") == 16


def test_pcie_board_has_no_nvlink(make_nvml: MakeNvml) -> None:
    facts = topology.read_nvml(make_nvml(device_count=1, nvlinks=0).module()).facts
    assert facts.get("nvlink[0].supported") is False
    assert facts.get("nvlink[0].active_links") == 0


def test_nvml_init_failure_is_a_reason(make_nvml: MakeNvml) -> None:
    found = topology.read_nvml(make_nvml(device_count=2, init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).module())
    facts = found.facts
    assert "nvlink" in facts.unknown and "NVML" in facts.unknown["nvlink"]
    assert found.uuids is None  # the GPUs could not be counted either


def test_the_gpus_are_listed_in_the_same_conversation(make_nvml: MakeNvml) -> None:
    fake = make_nvml(device_count=2, mig_devices={1: ["MIG-5c0a7b2e-6d1f-5e4a-9b3c-2f1e0d9c8b7a"]})
    found = topology.read_nvml(fake.module())
    assert found.uuids == (fake.uuid(0), fake.uuid(1))
    assert found.mig_parents == {"MIG-5c0a7b2e-6d1f-5e4a-9b3c-2f1e0d9c8b7a": 1}


def test_a_binding_error_leaves_the_links_unknown(make_nvml: MakeNvml) -> None:
    fake = make_nvml(device_count=2, raises={"nvmlDeviceGetNvLinkState": TypeError("bad struct")})
    facts = topology.read_nvml(fake.module()).facts
    assert facts.unknown["nvlink"] == "NVML nvmlDeviceGetNvLinkState: TypeError: bad struct"
    assert "nvlink[0].supported" not in facts  # not "supported, 0 links"


def test_parse_recorded_topo_matrix() -> None:
    raw, pairs = topology.parse_topo_matrix((FIXTURES / "topo-m.txt").read_text())
    assert pairs == {"0-1": "NV18"}
    assert "Legend" not in raw and "\x1b" not in raw
    assert raw.splitlines()[1].split()[:3] == ["GPU0", "X", "NV18"]


def test_parse_topo_matrix_with_nics_and_pcie() -> None:
    text = (
        "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tPIX\tSYS\tNODE\t0-15\t0\t\tN/A\n"
        "GPU1\tPIX\t X \tSYS\tNODE\t0-15\t0\t\tN/A\n"
        "GPU2\tSYS\tSYS\t X \tSYS\t16-31\t1\t\tN/A\n"
        "NIC0\tNODE\tNODE\tSYS\t X \n\nLegend:\n  X = Self\n"
    )
    _, pairs = topology.parse_topo_matrix(text)
    assert pairs == {"0-1": "PIX", "0-2": "SYS", "1-2": "SYS"}


def _fake_smi(tmp_path: Path, body: str) -> ProbeContext:
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return ProbeContext(env={"PATH": f"{tmp_path}{os.pathsep}{os.defpath}"}, timeout=3)


def test_topo_facts_from_a_real_executable(tmp_path: Path) -> None:
    ctx = _fake_smi(tmp_path, f"cat '{FIXTURES / 'topo-m.txt'}'\n")
    facts = topology.topo_facts(ctx)
    assert facts.get("nccl.link_types") == {"0-1": "NV18"}
    assert "NV18" in facts.get("nccl.topo_matrix")


def test_topo_facts_when_nvidia_smi_hangs(tmp_path: Path) -> None:
    ctx = _fake_smi(tmp_path, "sleep 30\n").but(timeout=0.5)
    facts = topology.topo_facts(ctx)
    assert "did not answer" in facts.unknown["nccl.link_types"]


def test_topo_facts_without_nvidia_smi() -> None:
    facts = topology.topo_facts(ProbeContext(env={"PATH": "/nonexistent"}))
    assert facts.unknown["nccl.topo_matrix"] == "nvidia-smi not found on PATH"

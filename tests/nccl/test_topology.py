from __future__ import annotations

import os
import stat
from pathlib import Path

import pynvml

from cuda_doctor.nccl import topology
from cuda_doctor.probes.base import ProbeContext
from tests.nccl.conftest import FIXTURES


class FakeNvml:
    """NVML as the H200 pair answered (tests/nccl/fixtures/h200x2/nvml-nvlink.txt)."""

    NVMLError = pynvml.NVMLError
    NVML_NVLINK_MAX_LINKS = pynvml.NVML_NVLINK_MAX_LINKS
    NVML_FEATURE_ENABLED = pynvml.NVML_FEATURE_ENABLED
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED

    def __init__(
        self, count: int = 2, links: int = 18, supported: bool = True, down: frozenset[tuple[int, int]] = frozenset()
    ) -> None:
        self.count, self.links, self.supported, self.down = count, links, supported, down
        self.initialised = 0

    def nvmlInit(self) -> None:
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        if not self.supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= self.links:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return 0 if (handle, link) in self.down else 1

    def nvmlDeviceGetNvLinkVersion(self, handle: int, link: int) -> int:
        return 6


def test_recorded_nvml_answers_match_the_fake() -> None:
    lines = (FIXTURES / "nvml-nvlink.txt").read_text().splitlines()
    assert "0 17 state 1 version 6" in lines
    assert lines[18].startswith("0 18 ERR NVMLError_InvalidArgument")


def test_nvlink_all_links_active() -> None:
    nvml = FakeNvml()
    facts = topology.nvlink_facts(nvml)
    assert facts.get("nvlink[0].active_links") == 18
    assert facts.get("nvlink[1].supported") is True
    assert facts.get("nvlink[1].version_raw") == 6
    assert nvml.initialised == 0


def test_nvlink_counts_inactive_links() -> None:
    facts = topology.nvlink_facts(FakeNvml(down=frozenset({(1, 3), (1, 4)})))
    assert facts.get("nvlink[0].active_links") == 18
    assert facts.get("nvlink[1].active_links") == 16


def test_pcie_board_has_no_nvlink() -> None:
    facts = topology.nvlink_facts(FakeNvml(count=1, supported=False))
    assert facts.get("nvlink[0].supported") is False
    assert facts.get("nvlink[0].active_links") == 0


def test_nvml_init_failure_is_a_reason() -> None:
    class Broken(FakeNvml):
        def nvmlInit(self) -> None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    facts = topology.nvlink_facts(Broken())
    assert "nvlink" in facts.unknown and "NVML" in facts.unknown["nvlink"]


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

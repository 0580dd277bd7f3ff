"""The GPU probe: NVML first, a real (fake) nvidia-smi executable when NVML cannot answer."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.probes.gpu import PROBE, GpuProbe

MakeNvml = Callable[..., Any]


def test_probe_shape() -> None:
    assert PROBE.name == "gpu"
    assert PROBE.applies(ProbeContext(fast=True, smoke=False)) is True


def test_nvml_answer_is_used_when_nvml_works(make_nvml: MakeNvml, fake_nvidia_smi: Any) -> None:
    facts = GpuProbe(nvml=make_nvml().module()).collect(fake_nvidia_smi.ctx("old"))
    assert facts.get("driver.source") == "nvml"
    assert facts.get("driver.version") == "580.159.04"
    assert facts.get("nvml.error") is None


def test_falls_back_to_nvidia_smi_when_the_library_is_missing(make_nvml: MakeNvml, fake_nvidia_smi: Any) -> None:
    nvml = make_nvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).module()
    facts = GpuProbe(nvml=nvml).collect(fake_nvidia_smi.ctx("ok"))
    assert facts.get("driver.source") == "nvidia-smi"
    assert facts.get("driver.status") == "ok"
    assert facts.get("driver.version") == "580.159.04"
    assert facts.get("driver.cuda_version") == "13.0"
    assert facts.get("gpu.count") == 1
    assert facts.get("gpu[0].compute_capability") == "9.0"
    assert facts.get("gpu[0].memory_total_mib") == 143771
    assert facts.get("nvml.error") == "libnvidia-ml.so.1 not found (NVML Shared Library Not Found)"


def test_falls_back_when_pynvml_cannot_be_imported(fake_nvidia_smi: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    facts = GpuProbe().collect(fake_nvidia_smi.ctx("ok"))
    assert facts.get("driver.source") == "nvidia-smi"
    assert facts.get("driver.status") == "ok"
    assert "cannot be imported" in facts.get("nvml.error")


def test_falls_back_when_nvml_hangs(make_nvml: MakeNvml, fake_nvidia_smi: Any) -> None:
    nvml = make_nvml(hang=threading.Event()).module()
    facts = GpuProbe(nvml=nvml).collect(fake_nvidia_smi.ctx("ok", timeout=0.5))
    assert facts.get("driver.source") == "nvidia-smi"
    assert facts.get("driver.status") == "ok"
    assert facts.get("nvml.error") == "NVML did not answer in 0.5 s"


def test_nvidia_smi_explains_what_nvml_could_not(make_nvml: MakeNvml, fake_nvidia_smi: Any) -> None:
    nvml = make_nvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).module()
    facts = GpuProbe(nvml=nvml).collect(fake_nvidia_smi.ctx("not_loaded"))
    assert facts.get("driver.status") == "not_loaded"
    assert facts.get("driver.source") == "nvidia-smi"
    assert "couldn't communicate with the NVIDIA driver" in facts.get("driver.error")


@pytest.mark.parametrize(
    ("code", "status"),
    [(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version_mismatch")],
)
def test_definitive_nvml_answers_are_kept(make_nvml: MakeNvml, fake_nvidia_smi: Any, code: int, status: str) -> None:
    facts = GpuProbe(nvml=make_nvml(init_error=code).module()).collect(fake_nvidia_smi.ctx("ok"))
    assert facts.get("driver.source") == "nvml"
    assert facts.get("driver.status") == status


def test_no_gpu_from_nvml_is_kept(make_nvml: MakeNvml, fake_nvidia_smi: Any) -> None:
    facts = GpuProbe(nvml=make_nvml(device_count=0).module()).collect(fake_nvidia_smi.ctx("ok"))
    assert facts.get("driver.source") == "nvml"
    assert facts.get("driver.status") == "no_gpu"
    assert facts.get("gpu.count") == 0


def test_both_sources_failing_keeps_both_reasons(make_nvml: MakeNvml, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    ctx = ProbeContext(root=tmp_path, env={"PATH": str(empty)}, timeout=5)
    nvml = make_nvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).module()
    facts = GpuProbe(nvml=nvml).collect(ctx)
    assert facts.get("driver.status") == "library_not_found"
    assert facts.get("driver.source") == "nvml"
    assert facts.get("driver.error") == (
        "libnvidia-ml.so.1 not found (NVML Shared Library Not Found); nvidia-smi not found on PATH"
    )
    assert facts.get("nvml.error") == "libnvidia-ml.so.1 not found (NVML Shared Library Not Found)"
    assert "driver.version" in facts.unknown


@pytest.mark.parametrize(
    ("mode", "status", "error"),
    [
        ("hang", "not_answering", "nvidia-smi did not answer in 1 s"),
        ("flood", "output_flood", "nvidia-smi produced more than 8 MiB of output and was stopped"),
    ],
)
def test_a_hung_or_flooding_nvidia_smi_is_not_a_missing_driver(
    make_nvml: MakeNvml, fake_nvidia_smi: Any, mode: str, status: str, error: str
) -> None:
    # nvidia-smi ran, so a driver is installed: what went wrong is nvidia-smi's, not NVML's
    # "library not found" (whose reason is kept in nvml.error)
    nvml = make_nvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).module()
    facts = GpuProbe(nvml=nvml).collect(fake_nvidia_smi.ctx(mode, timeout=1.0))
    assert facts.get("driver.status") == status
    assert facts.get("driver.error") == error
    assert facts.get("nvml.error") == "libnvidia-ml.so.1 not found (NVML Shared Library Not Found)"


def test_a_hung_nvml_without_nvidia_smi_keeps_the_hang(make_nvml: MakeNvml, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    nvml = make_nvml(hang=threading.Event()).module()
    facts = GpuProbe(nvml=nvml).collect(ProbeContext(root=tmp_path, env={"PATH": str(empty)}, timeout=0.5))
    assert facts.get("driver.status") == "not_answering"
    assert facts.get("driver.error") == "NVML did not answer in 0.5 s; nvidia-smi not found on PATH"

"""The GPU probe: NVML first, a real (fake) nvidia-smi executable when NVML cannot answer."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from cuda_doctor.base import children
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.probe import PROBE, GpuProbe

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"

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


# -- cuda-doctor's own children on the GPU ---------------------------------------------------
@pytest.fixture
def own_child() -> Iterator[int]:
    """A real child of cuda-doctor (``children.Child``, recorded as running), and its pid: the
    JAX child holds a context on every GPU while the GPU probe reads."""
    source = "import json, os, time; print(json.dumps({'pid': os.getpid()}), flush=True); time.sleep(60)"
    child = children.Child(sys.executable, source, env={"PATH": os.defpath}, timeout=60)
    record = child.wait_for(lambda record: "pid" in record)
    assert record is not None
    yield int(record["pid"])
    child.stop()


def test_cuda_doctors_own_children_are_not_processes_on_the_gpu(make_nvml: MakeNvml, own_child: int) -> None:
    fake = make_nvml()
    fake.readings["processes"] = [
        SimpleNamespace(pid=own_child, usedGpuMemory=512 << 20),
        SimpleNamespace(pid=4242, usedGpuMemory=1 << 30),
    ]
    facts = GpuProbe(nvml=fake.module()).collect(ProbeContext(env={"PATH": os.defpath}))
    assert [proc["pid"] for proc in facts.get("gpu[0].processes")] == [4242]
    assert facts.get("gpu[0].process_count") == 1


def test_the_process_that_asks_is_not_another_process_on_the_gpu(make_nvml: MakeNvml) -> None:
    # a training script asking through the API already holds its GPU
    fake = make_nvml()
    fake.readings["processes"] = [
        SimpleNamespace(pid=os.getpid(), usedGpuMemory=600 << 20),
        SimpleNamespace(pid=4242, usedGpuMemory=1 << 30),
    ]
    facts = GpuProbe(nvml=fake.module()).collect(ProbeContext(env={"PATH": os.defpath}))
    assert [proc["pid"] for proc in facts.get("gpu[0].processes")] == [4242]


def test_nvidia_smi_too_leaves_out_cuda_doctors_own_children(
    fake_nvidia_smi: Any, own_child: int, tmp_path: Path
) -> None:
    fixtures = tmp_path / "h200"
    shutil.copytree(H200, fixtures)
    xml = fixtures / "nvidia-smi-q-old-driver.xml"  # python3 (pid 4242, compute) and Xorg (graphics)
    xml.write_text(xml.read_text().replace("<pid>4242</pid>", f"<pid>{own_child}</pid>"))
    ctx = fake_nvidia_smi.ctx("old")
    env = {**ctx.env, "FAKE_NVIDIA_SMI_FIXTURES": str(fixtures), "CUDA_DOCTOR_DISABLE_NVML": "1"}
    facts = GpuProbe().collect(ctx.but(env=env))
    assert facts.get("driver.source") == "nvidia-smi"
    assert facts.get("gpu[0].processes") == []
    assert facts.get("gpu[0].process_count") == 0

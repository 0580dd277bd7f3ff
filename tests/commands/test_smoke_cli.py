"""``cuda-doctor smoke`` on the recorded H200 (the fake nvidia-smi) when the smoke run never reaches
the GPU: the checklist must not say "no GPU found" under a headline that lists one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cuda_doctor.smoke.probe as smoke_probe
from cuda_doctor.cli import cli
from cuda_doctor.smoke.runner import ChildRun, ParsedOutput, SmokeRun

STUB = "cuInit failed: CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library"


def stub_library_run(ctx: Any, progress: Any = None) -> SmokeRun:
    """What the driver level reports with the toolkit's stub libcuda first on LD_LIBRARY_PATH:
    it fails at cuInit, before it can count the GPUs; the framework level is not started."""
    result = {
        "status": "failed",
        "error": STUB,
        "error_name": "CUDA_ERROR_STUB_LIBRARY",
        "library": "/usr/local/cuda/lib64/stubs/libcuda.so.1",
    }
    driver = ChildRun("driver", ParsedOutput(steps=("cuInit",), result=result), 0.2, returncode=0)
    return SmokeRun(30.0, driver, None, "the driver level failed", seconds=0.3)


@pytest.fixture
def recorded_h200(fake_nvidia_smi: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in fake_nvidia_smi.ctx().env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_DOCTOR_DISABLE_NVML", "1")
    monkeypatch.setattr(smoke_probe, "run_smoke", stub_library_run)


def test_a_smoke_run_that_reached_no_gpu_does_not_say_there_is_none(
    recorded_h200: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["smoke", "-v", "--python", sys.executable], catch_exceptions=False)
    assert done.output.startswith("driver 580.159.04 (CUDA 13.0) · 1× NVIDIA H200"), done.output
    assert "no GPU found" not in done.output
    assert f"not applicable: the smoke run did not reach the GPUs ({STUB})" in done.output
    assert done.exit_code == 1  # the stub library is a failure of its own (CD702)

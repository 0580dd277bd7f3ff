"""Turning what the children said into facts (no child needed: the output is given)."""

from __future__ import annotations

import json

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.smoke.probe import facts_from_run
from cuda_doctor.smoke.runner import ChildRun, ParsedOutput, SmokeRun, _with_error, parse_output

DRIVER_OK = ChildRun(
    "driver",
    ParsedOutput(("load libcuda",), (), {"status": "ok", "device_count": 2, "devices": []}),
    1.0,
    0,
)


def test_timeout_keeps_the_gpus_that_finished_and_names_the_step() -> None:
    t4 = {
        "index": 0,
        "errors": [],
        "name": "Tesla T4",
        "capability": "7.5",
        "bf16_native": False,
        "fp32_tflops": 6.9,
        "fp16_tflops": 40.0,
        "fp32_ok": True,
    }
    text = "".join(
        json.dumps(r) + "\n"
        for r in ({"step": "matmul fp32 on GPU 0"}, {"device": t4}, {"step": "matmul fp16 on GPU 1"})
    )
    child = _with_error(ChildRun("framework", parse_output(text), 30.0, -9, timed_out=True), 30)
    facts = facts_from_run(SmokeRun(30.0, DRIVER_OK, child), ProbeContext(env={}))
    assert facts.get("smoke.status") == "timeout"
    assert facts.get("smoke.error") == "killed after 30 s while running: matmul fp16 on GPU 1"
    assert facts.get("smoke[0].fp16_tflops") == 40.0
    assert facts.reason("smoke[0].bf16_tflops") == "bf16 is not native on compute capability 7.5 (needs 8.0)"
    assert facts.reason("smoke[0].amp_speedup_bf16") == facts.reason("smoke[0].bf16_tflops")


def test_a_failed_step_explains_the_missing_figures() -> None:
    device = {
        "index": 0,
        "errors": [{"step": "matmul bf16 on GPU 0", "error": "RuntimeError: CUDA error: no kernel image is available"}],
        "bf16_native": True,
        "fp32_tflops": 51.0,
    }
    result = {
        "status": "failed",
        "error": "matmul bf16 on GPU 0: RuntimeError: CUDA error: no kernel image is available",
        "error_step": "matmul bf16 on GPU 0",
        "devices": [device],
        "device_count": 1,
    }
    child = ChildRun("framework", ParsedOutput((), (), result), 5.0, 0)
    facts = facts_from_run(SmokeRun(30.0, DRIVER_OK, child), ProbeContext(env={"CUDA_VISIBLE_DEVICES": "0"}))
    assert facts.get("smoke.status") == "failed"
    assert facts.get("smoke.framework_level.error_step") == "matmul bf16 on GPU 0"
    assert facts.get("smoke[0].error_step") == "matmul bf16 on GPU 0"
    assert facts.reason("smoke[0].bf16_tflops") == (
        "matmul bf16 on GPU 0 failed: RuntimeError: CUDA error: no kernel image is available"
    )
    assert facts.get("smoke.cuda_visible_devices") == "0"


def test_no_torch_is_a_skipped_framework_level() -> None:
    result = {"status": "no_torch", "error": "ModuleNotFoundError: No module named 'torch'", "devices": []}
    child = ChildRun("framework", ParsedOutput(("import torch",), (), result), 0.1, 0)
    facts = facts_from_run(SmokeRun(30.0, DRIVER_OK, child), ProbeContext(env={}, python="/venv/bin/python"))
    assert facts.get("smoke.status") == "ok"  # the driver level ran; torch is just absent
    assert facts.get("smoke.framework_level.status") == "skipped"
    assert facts.get("smoke.framework_level.error") == (
        "torch is not installed for /venv/bin/python (ModuleNotFoundError: No module named 'torch')"
    )


def test_a_stub_libcuda_counts_no_gpu_as_none_found() -> None:
    """Seen on an H200 with the toolkit's stub first on LD_LIBRARY_PATH: cuInit fails before the
    driver level counts, and torch, whose CUDA did not start, says 0: the count is unknown, not 0."""
    failed = {
        "status": "failed",
        "error": "cuInit failed: CUDA_ERROR_STUB_LIBRARY (34)",
        "error_name": "CUDA_ERROR_STUB_LIBRARY",
        "devices": [],
    }
    driver = ChildRun("driver", ParsedOutput(("cuInit",), (), failed), 0.5, 0)
    torch = {
        "status": "failed",
        "error": "torch.cuda.is_available() is False",
        "cuda_available": False,
        "device_count": 0,
        "devices": [],
    }
    framework = ChildRun("framework", ParsedOutput(("cuda init",), (), torch), 2.0, 0)
    facts = facts_from_run(SmokeRun(30.0, driver, framework), ProbeContext(env={}))
    assert facts.get("smoke.device_count") is None
    assert facts.reason("smoke.device_count") == (
        "the smoke run did not reach the GPUs (cuInit failed: CUDA_ERROR_STUB_LIBRARY (34))"
    )

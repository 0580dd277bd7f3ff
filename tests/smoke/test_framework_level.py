"""The framework-level smoke script shares the GPU probe's tables through the child-side modules."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cuda_doctor.base.childside import clocks
from cuda_doctor.gpu.nvml import gpu_facts
from cuda_doctor.smoke import framework_level
from cuda_doctor.smoke.runner import script_source


def test_the_clock_event_reason_table_has_one_source() -> None:
    # smoke[i] and gpu[i] reasons are compared: both name every bit from the one table
    assert framework_level.CLOCK_EVENT_REASONS is clocks.CLOCK_EVENT_REASONS is gpu_facts.CLOCK_EVENT_REASONS
    # the script runs in the target interpreter, composed with that table (defined there once)
    tree = ast.parse(script_source("framework"))
    defined = [
        node
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "CLOCK_EVENT_REASONS"
    ]
    assert len(defined) == 1
    value = defined[0].value
    assert value is not None and ast.literal_eval(value) == gpu_facts.CLOCK_EVENT_REASONS


# -- CUDA is started once, and what stops it is said at once ------------------------------------
class _Untouchable:
    """torch.cuda of a process where CUDA must not be started again."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"torch.cuda.{name} was used")


def _fake_torch(cuda: Any, parse: Any = None) -> Any:
    def accept(text: str) -> None:
        return None

    return SimpleNamespace(
        __version__="2.9.1+cu128",
        version=SimpleNamespace(cuda="12.8"),
        _C=SimpleNamespace(_accelerator_setAllocatorSettings=parse or accept),
        cuda=cuda,
    )


def _records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_allocator_settings_torch_rejects_end_the_run_before_cuda(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def parse(text: str) -> None:
        raise ValueError("Unrecognized key 'expandable_segment' in CUDA allocator config.")

    monkeypatch.setitem(sys.modules, "torch", _fake_torch(_Untouchable(), parse))
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segment:True")
    result = framework_level.run({"compile": False})
    error = (
        "torch rejects PYTORCH_CUDA_ALLOC_CONF=expandable_segment:True:"
        " ValueError: Unrecognized key 'expandable_segment' in CUDA allocator config."
    )
    assert (result["status"], result["error"], result["error_step"]) == ("failed", error, "cuda init")
    # said before the result, in case the process dies first
    assert {"failure": {"step": "cuda init", "error": error}} in _records(capsys.readouterr().out)


def test_cuda_that_failed_to_start_before_is_not_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(_Untouchable()))
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
        monkeypatch.delenv(name, raising=False)
    result = framework_level.run({"compile": False, "cuda_start_error": "RuntimeError: CUDA error: out of memory"})
    assert result["error"] == "CUDA failed to start in this process before: RuntimeError: CUDA error: out of memory"
    assert result["error_step"] == "cuda init"


def test_a_failed_start_of_cuda_is_the_error_and_nothing_runs_after(monkeypatch: pytest.MonkeyPatch) -> None:
    def init() -> None:
        raise RuntimeError("CUDA error: initialization error")

    cuda = SimpleNamespace(is_available=lambda: True, device_count=lambda: 1, init=init)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(cuda))
    result = framework_level.run({"compile": False})
    assert result["error"] == "RuntimeError: CUDA error: initialization error"
    assert result["devices"] == []  # no GPU step started CUDA a second time


_AMP_PROBE = """
import json
import torch

steps = {"__name__": "smoke_steps"}
exec(compile(SOURCE, "<smoke>", "exec"), steps)
answers = {}
for bf16 in (True, False):
    gpu = steps["Gpu"](torch, 0, steps["Nvml"]([]), 64)
    gpu.device = torch.device("cpu")  # a CPU-only torch: autocast and GradScaler disable themselves
    gpu.sync = lambda: None
    gpu.out["bf16_native"] = bf16
    made = []
    real = gpu.grad_scaler
    gpu.grad_scaler = lambda: made.append(1) or real()
    gpu.amp_step()
    answers[str(bf16)] = {k: gpu.out[k] for k in ("amp_dtype", "amp_grad_scaler", "amp_step_ok")} | {"made": len(made)}
print(json.dumps(answers))
"""


@pytest.mark.slow
def test_the_amp_step_scales_the_loss_for_float16_only(torch_cpu_python: Path, base_env: dict[str, str]) -> None:
    """GradScaler is for float16's narrow range; bfloat16 needs none (CD302), and the step uses none."""
    program = f"SOURCE = {script_source('framework')!r}\n" + _AMP_PROBE
    done = subprocess.run(
        [str(torch_cpu_python), "-c", program], env=base_env, capture_output=True, text=True, timeout=180, check=True
    )
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert answers["True"] == {"amp_dtype": "bfloat16", "amp_grad_scaler": False, "amp_step_ok": True, "made": 0}
    assert answers["False"] == {"amp_dtype": "float16", "amp_grad_scaler": True, "amp_step_ok": True, "made": 1}

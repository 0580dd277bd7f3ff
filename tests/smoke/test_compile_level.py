"""The compile level: a child of the target interpreter that imports torch.compile's machinery while
the framework level runs, touches no GPU until it is handed them, and reports Triton's and Inductor's
own errors per GPU.  A stand-in ``torch`` package (no GPU here) records what was asked of it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.compile.probe import start_smoke_child
from cuda_doctor.smoke.probe import _compile_facts
from cuda_doctor.smoke.runner import ChildRun, ParsedOutput, SmokeRun, _compile_level

COMPILER_MISSING = "Failed to find C compiler. Please specify via CC environment variable."

FAKE_TORCH = f"""
import os

__version__ = "2.11.0+cu130"
_LOG = os.environ["FAKE_TORCH_LOG"]


def _said(what):
    with open(_LOG, "a") as handle:
        handle.write(what + "\\n")


class _Cuda:
    def is_available(self):
        _said("cuda")
        return True

    def device_count(self):
        _said("cuda")
        return 2

    def synchronize(self, device=None):
        pass


cuda = _Cuda()


def rand(n, device=None):
    _said("tensor on " + str(device))
    return [0.5] * n


def compile(function):
    def compiled(x):
        raise RuntimeError({COMPILER_MISSING!r})
    return compiled
"""


@pytest.fixture
def fake_torch(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``import torch`` is the stand-in, and the log of what it was asked."""
    site = tmp_path / "site"
    (site / "torch" / "_dynamo").mkdir(parents=True)
    (site / "torch" / "_inductor").mkdir()
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH, encoding="utf-8")
    (site / "torch" / "_dynamo" / "__init__.py").write_text("", encoding="utf-8")
    (site / "torch" / "_inductor" / "__init__.py").write_text("", encoding="utf-8")
    (site / "torch" / "_inductor" / "compile_fx.py").write_text("", encoding="utf-8")
    log = tmp_path / "torch.log"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "FAKE_TORCH_LOG": str(log), "HOME": str(tmp_path)}
    return env, log


def test_the_gpus_are_untouched_until_handed_over(fake_torch: tuple[dict[str, str], Path]) -> None:
    env, log = fake_torch
    ctx = ProbeContext(env=env, python=sys.executable)
    child = start_smoke_child(ctx, 60.0)
    assert child is not None
    try:
        assert child.wait_for(lambda record: record.get("ready") is True) is not None
        time.sleep(0.2)  # it waits for the order: nothing more is asked of torch meanwhile
        assert not log.exists()
    finally:
        run = _compile_level(ctx, child, 60.0, 60.0, None)
    assert "cuda" in log.read_text()
    assert run.result is not None and run.result["status"] == "ok"


def test_each_gpu_reports_tritons_and_inductors_own_errors(fake_torch: tuple[dict[str, str], Path]) -> None:
    env, _log = fake_torch
    ctx = ProbeContext(env=env, python=sys.executable)
    child = start_smoke_child(ctx, 60.0)
    assert child is not None
    run = _compile_level(ctx, child, 60.0, 60.0, None)
    facts = Facts()
    facts.set("smoke.framework_level.device_count", 2)
    facts.set("smoke[0].step_seconds", {"allocate": 0.1})
    _compile_facts(facts, SmokeRun(60.0, ChildRun("driver", ParsedOutput(), 0.0), compiled=run))
    assert facts.get("smoke.compile_level.status") == "ok"
    assert facts.get("smoke.compile_level.compile_cache") == "new"  # in $HOME/.cache/cuda-doctor/compile
    for index in (0, 1):
        # no triton here: its own import error; torch.compile: Inductor's error as raised
        assert facts.get(f"smoke[{index}].triton_compile") == "ModuleNotFoundError: No module named 'triton'"
        assert facts.get(f"smoke[{index}].torch_compile") == f"RuntimeError: {COMPILER_MISSING}"
    steps = facts.get("smoke[0].step_seconds")
    assert set(steps) == {"allocate", "triton_compile", "torch_compile"}  # merged with the framework level's


def test_a_compile_level_that_did_not_run_leaves_each_gpu_unknown_with_why() -> None:
    facts = Facts()
    facts.set("smoke[0].vector_add_ok", True)  # the driver level reached GPU 0
    run = SmokeRun(60.0, ChildRun("driver", ParsedOutput(), 0.0), compile_skipped="no time left of the 60 s limit")
    _compile_facts(facts, run)
    assert facts.get("smoke.compile_level.status") == "skipped"
    assert facts.get("smoke[0].torch_compile") is None
    assert facts.reason("smoke[0].torch_compile") == "the compile level did not run: no time left of the 60 s limit"


def test_a_child_never_handed_the_gpus_says_so(fake_torch: tuple[dict[str, str], Path]) -> None:
    env, log = fake_torch
    child = start_smoke_child(ProbeContext(env=env, python=sys.executable), 60.0)
    assert child is not None
    assert child.wait_for(lambda record: record.get("ready") is True) is not None
    result = child.finish()  # its stdin closed without an order
    assert '"status": "not_run"' in result.stdout
    assert not log.exists()

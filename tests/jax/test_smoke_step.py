"""The JAX smoke step in two stages in the real JAX child (on JAX's CPU device: no GPU here):
compiled by ``prepare`` (phase 1 of a check), measured by ``smoke`` (phase 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cuda_doctor.base import children
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.jax.probe import is_backend, is_report, start_child
from cuda_doctor.jax.smoke_step import is_prepared, prepare, smoke
from cuda_doctor.smoke.runner import HANG_VARIABLE, parse_output, script_source

CPU = {"platform": "cpu", "size": 256}


def _ctx(python: Path, **env: str) -> ProbeContext:
    return ProbeContext(python=str(python), env={"PATH": os.defpath, "LANG": "C.UTF-8", **env}, smoke_timeout=60)


def _child_with_backend(ctx: ProbeContext) -> children.Child:
    child = start_child(ctx, wait=True, timeout=120)
    assert child.wait_for(is_report) is not None
    assert child.wait_for(is_backend) is not None  # initialised without being asked
    return child


def _one_gpu() -> Facts:
    facts = Facts()
    facts.set("jax.gpu_count", 1)  # as on a GPU machine: the step is ordered
    return facts


@pytest.mark.slow
def test_compiled_first_then_measured_on_the_word(jax_cpu_python: Path) -> None:
    ctx = _ctx(jax_cpu_python)
    child = _child_with_backend(ctx)
    prepare(ctx, child, CPU)
    prepared = child.seen(is_prepared)
    assert prepared is not None and prepared["prepared"]["seconds"] > 0
    assert child.seen(lambda record: "device" in record or "result" in record) is None  # nothing measured yet
    out = smoke(ctx, child, _one_gpu())
    assert out.get("smoke.jax_level.status") == "ok", out.get("smoke.jax_level.error")
    assert out.get("smoke[0].jax_kind") == "cpu" and out.get("smoke[0].jax_bf16_ok") is True
    assert 0 < out.get("smoke[0].jax_bf16_rel_err") < out.get("smoke[0].jax_bf16_tolerance") == 5e-2
    assert out.get("smoke[0].jax_bf16_tflops") > 0
    assert out.get("smoke[0].jax_compile_seconds") > 0  # timed in the first stage
    assert out.get("smoke.jax_level.seconds") >= prepared["prepared"]["seconds"]
    steps = parse_output(child.finish().stdout).steps
    compiled, measured = steps.index("jax matmul bf16 on CPU 0: compile"), steps.index("jax matmul bf16 on CPU 0")
    assert compiled < measured < steps.index("jax matmul bf16 on CPU 0: check on the host")


@pytest.mark.slow
def test_a_compiled_step_the_parent_never_asks_for_ends_without_a_result(jax_cpu_python: Path) -> None:
    ctx = _ctx(jax_cpu_python)
    child = _child_with_backend(ctx)
    prepare(ctx, child, CPU)
    assert child.seen(is_prepared) is not None
    result = child.stop(grace=5.0)  # stdin closed: no smoke run follows
    assert result.returncode == 0 and not result.timed_out
    assert parse_output(result.stdout).result is None


@pytest.mark.slow
def test_a_hang_while_compiling_is_killed_in_phase_1_and_named_in_phase_2(jax_cpu_python: Path) -> None:
    ctx = _ctx(jax_cpu_python, **{HANG_VARIABLE: "jax matmul bf16 on CPU 0: compile"}).but(smoke_timeout=3)
    child = _child_with_backend(ctx)
    prepare(ctx, child, CPU)
    assert child.result is not None and child.result.timed_out  # killed before phase 1 ends
    out = smoke(ctx, child, _one_gpu())
    assert out.get("smoke.jax_level.status") == "timeout"
    assert out.get("smoke.jax_level.error") == "killed after 3 s while running: jax matmul bf16 on CPU 0: compile"
    assert out.get("smoke.jax_level.error_step") == "jax matmul bf16 on CPU 0: compile"


@pytest.mark.slow
def test_without_a_prepared_stage_the_whole_step_runs_in_phase_2(jax_cpu_python: Path) -> None:
    """``cuda-doctor smoke``: the script compiles and measures in one run (the real script, on
    the CPU device through its own CONFIG)."""
    ctx = _ctx(jax_cpu_python)
    child = _child_with_backend(ctx)
    assert child.send({"run": script_source("jax"), "argv": [json.dumps(CPU)]})
    parsed = parse_output(child.finish().stdout)
    assert parsed.result is not None and parsed.result["status"] == "ok", parsed.result
    assert not any("prepared" in record for record in children.parse_records(child.finish().stdout))

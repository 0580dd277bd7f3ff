"""The phase-2 JAX probe: the backend and the smoke step in the child phase 1 left, or in its own."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import collect
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.jax import gpu_probe
from cuda_doctor.jax.gpu_probe import PROBE, is_backend, smoke
from cuda_doctor.jax.probe import PROBE as PHASE_1
from cuda_doctor.jax.probe import is_report, start_child
from cuda_doctor.smoke.runner import HANG_VARIABLE, parse_output, script_source

JaxWheel = Callable[[str], Path]


def _counted(tmp_path: Path, python: Path) -> tuple[str, Path]:
    """An interpreter that logs each start (and the preallocation setting it was given)."""
    log = tmp_path / "starts.log"
    wrapper = tmp_path / "counted-python"
    wrapper.write_text(f'#!/bin/sh\necho "$$ $XLA_PYTHON_CLIENT_PREALLOCATE" >> {log}\nexec {python} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), log


def _ctx(python: str | Path, **env: str) -> ProbeContext:
    return ProbeContext(python=str(python), env={"PATH": os.defpath, "LANG": "C.UTF-8", **env}, smoke_timeout=60)


@pytest.mark.slow
def test_phase_1_then_phase_2_import_jax_once(jax_cpu_python: Path, tmp_path: Path) -> None:
    python, log = _counted(tmp_path, jax_cpu_python)
    ctx = _ctx(python, XLA_PYTHON_CLIENT_PREALLOCATE="true")
    with ctx.handoff.open():
        facts = collect(ctx, [PHASE_1])
        facts.merge(collect(ctx, [PROBE]))
    assert facts.get("jax.backend") == "cpu"
    assert facts.get("jax.platforms") == ["cpu"]
    assert facts.get("jax.devices") == [{"id": 0, "platform": "cpu", "kind": "cpu"}]
    assert facts.get("jax.gpu_count") == 0
    assert facts.get("jax.cuda_error") is None  # JAX warns of a missing plugin only where /dev/nvidia* exists
    assert facts.get("jax.cuda_components") is None  # no plugin: nothing loaded for one
    assert facts.get("smoke.jax_level.status") == "skipped"
    assert facts.get("smoke.jax_level.error") == "JAX has no GPU (its backend is cpu): nothing to run the JAX step on"
    assert facts.get("jax.env") == {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}  # the user's own value
    starts = log.read_text().split("\n")
    assert [line.split()[1] for line in starts if line] == ["false"]  # one child, told not to preallocate


@pytest.mark.slow
def test_on_its_own_it_reports_the_phase_1_facts_too(jax_cpu_python: Path, jax_wheel: JaxWheel) -> None:
    plugin = jax_wheel("jax-cuda13-plugin==0.10.2")
    facts = PROBE.collect(_ctx(jax_cpu_python, PYTHONPATH=str(plugin)))
    assert facts.get("jax.cuda_plugin") == "jax-cuda13-plugin"
    assert facts.get("jax.backend") == "cpu"  # without its PJRT the plugin registers no CUDA backend
    components = facts.get("jax.cuda_components")
    assert components["cudnn"]["build"] == "9.12.0"
    assert components["cudnn"]["runtime"] is None
    assert components["cudnn"]["error"] == "RuntimeError: cuDNN not found."  # the plugin's own query
    assert facts.get("jax.driver_cuda") is None  # no driver here: the plugin's query answers 0


def test_without_jax_phase_2_starts_nothing(plain_python: Path, tmp_path: Path) -> None:
    python, log = _counted(tmp_path, plain_python)
    ctx = _ctx(python)
    with ctx.handoff.open():
        facts = collect(ctx, [PHASE_1])
        facts.merge(collect(ctx, [PROBE]))
    assert facts.get("jax.installed") is False
    assert "jax is not installed" in facts.unknown["jax.backend"]
    assert not facts.has("smoke.jax_level.status")
    assert len(log.read_text().split()) == 2  # one start (pid and setting), for phase 1 only


@pytest.mark.slow
def test_the_smoke_step_runs_a_real_jitted_bf16_matmul(jax_cpu_python: Path) -> None:
    """The JAX step's own code on JAX's CPU device (this machine has no GPU), in the JAX child."""
    ctx = _ctx(jax_cpu_python)
    child = start_child(ctx, wait=True, timeout=120)
    assert child.wait_for(is_report) is not None
    assert child.send({"backend": {}}) and child.wait_for(is_backend) is not None
    config = json.dumps({"platform": "cpu", "size": 256})
    assert child.send({"run": script_source("jax"), "argv": [config]})
    parsed = parse_output(child.finish().stdout)
    assert parsed.result is not None and parsed.result["status"] == "ok", parsed.result
    device = parsed.result["devices"][0]
    assert device["kind"] == "cpu" and device["bf16_ok"] is True
    assert 0 < device["bf16_rel_err"] < device["bf16_tolerance"] == 5e-2
    assert device["bf16_tflops"] > 0
    assert "jax matmul bf16 on CPU 0: check on the host" in parsed.steps


@pytest.mark.slow
def test_a_hang_in_the_smoke_step_is_killed_and_named(jax_cpu_python: Path) -> None:
    ctx = _ctx(jax_cpu_python, **{HANG_VARIABLE: "jax devices"}).but(smoke_timeout=3)
    child = start_child(ctx, wait=True, timeout=120)
    assert child.wait_for(is_report) is not None
    facts = Facts()
    assert gpu_probe.JaxGpuProbe()._backend(ctx, child, facts)
    facts.set("jax.gpu_count", 1)  # as on a GPU machine: the step is ordered
    out = smoke(ctx, child, facts)
    assert out.get("smoke.jax_level.status") == "timeout"
    assert out.get("smoke.jax_level.error") == "killed after 3 s while running: jax devices"
    assert child.result is not None and child.result.timed_out


@pytest.mark.slow
def test_the_loaded_libraries_and_the_wheel_that_owns_each(
    jax_cpu_python: Path, unpacked: Callable[[str], Path]
) -> None:
    """A real CUDA runtime from its wheel, mapped into the JAX child (preloaded: no GPU here to
    make JAX load it): the one reader of cuda_doctor.base.childside names it and its distribution."""
    site = unpacked("nvidia-cuda-runtime==13.0.96")
    cudart = site / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    facts = PROBE.collect(_ctx(jax_cpu_python, PYTHONPATH=str(site), LD_PRELOAD=str(cudart)))
    loaded = facts.get("jax.loaded_libraries")
    assert loaded == [
        {
            "library": "cudart",
            "path": str(cudart),
            "soname": "libcudart.so.13",
            "version": "13.0",
            "distribution": "nvidia-cuda-runtime",
            "distribution_version": "13.0.96",
        }
    ]

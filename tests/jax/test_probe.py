"""The phase-1 JAX probe on real interpreters: a real CPU-only jax, a real CUDA plugin wheel
installed without its PJRT, and real wheels of two releases that do not match."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.facts import Facts
from cuda_doctor.jax._child import BACKEND_FACTS
from cuda_doctor.jax.probe import ALL_JAX_FACTS, JAX_CHILD, PROBE, child_env, user_settings
from cuda_doctor.probes.base import ProbeContext

JaxWheel = Callable[[str], Path]


def ctx_for(python: Path | str, *path: Path, **env: str) -> ProbeContext:
    base = {"PATH": os.defpath, "LANG": "C.UTF-8", **env}
    if path:
        base["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    return ProbeContext(python=str(python), env=base)


def accounted(facts: Facts) -> None:
    """Every JAX fact is known or has a reason."""
    missing = [name for name in ALL_JAX_FACTS if name not in facts.values and name not in facts.unknown]
    assert missing == []


def test_the_probe_is_a_full_check_probe() -> None:
    assert PROBE.name == "jax"
    assert PROBE.applies(ProbeContext(fast=False))
    assert not PROBE.applies(ProbeContext(fast=True))


def test_the_child_runs_without_preallocation_and_the_users_values_are_kept() -> None:
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "XLA_FLAGS": "--xla_gpu_autotune_level=0", "HOME": "/root"}
    assert child_env(env)["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert child_env(env)["XLA_FLAGS"] == "--xla_gpu_autotune_level=0"
    assert user_settings(env) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "XLA_FLAGS": "--xla_gpu_autotune_level=0"}


def test_no_jax_installed(plain_python: Path) -> None:
    facts = PROBE.collect(ctx_for(plain_python))
    assert facts.get("jax.installed") is False
    assert facts.reason("jax.version") == f"jax is not installed in {facts.get('jax.python')}"
    assert "jax is not installed" in facts.unknown["jax.backend"]
    accounted(facts)


@pytest.mark.slow
def test_real_cpu_only_jax(jax_cpu_python: Path) -> None:
    facts = PROBE.collect(ctx_for(jax_cpu_python, XLA_PYTHON_CLIENT_MEM_FRACTION=".5"))
    v = facts.values
    assert v["jax.installed"] is True
    assert (v["jax.version"], v["jax.jaxlib_version"]) == ("0.10.2", "0.10.2")
    assert v["jax.requires_jaxlib"] == "jaxlib<=0.10.2,>=0.10.1"  # jax's own Requires-Dist
    assert v["jax.distributions"] == {"jax": "0.10.2", "jaxlib": "0.10.2"}
    assert v["jax.cuda_plugins"] == [] and v["jax.cuda_plugin"] is None and v["jax.plugin_build"] is None
    assert v["jax.import_error"] is None and v["jax.import_seconds"] > 0
    assert v["jax.env"] == {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}
    # outside a pipeline run nothing is left for phase 2, and no backend was initialised
    assert "only in a full check" in facts.unknown["jax.backend"]
    accounted(facts)


@pytest.mark.slow
def test_a_real_cuda13_plugin_without_its_pjrt(jax_cpu_python: Path, jax_wheel: JaxWheel) -> None:
    facts = PROBE.collect(ctx_for(jax_cpu_python, jax_wheel("jax-cuda13-plugin==0.10.2")))
    v = facts.values
    assert v["jax.cuda_plugin"] == "jax-cuda13-plugin"
    assert (v["jax.cuda_plugin_version"], v["jax.cuda_plugin_major"]) == ("0.10.2", 13)
    assert v["jax.cuda_pjrt_version"] is None
    assert v["jax.plugin_requires_pjrt"] == "jax-cuda13-pjrt==0.10.2"  # the plugin's own pin
    # read from the plugin's own constants, without CUDA: what it was built with
    assert v["jax.plugin_build"]["cuda"] == "13.0"
    assert v["jax.plugin_build"]["cudnn"] == "9.12.0"


@pytest.mark.slow
def test_jaxlib_newer_than_jax_fails_at_import_with_its_own_words(jax_cpu_python: Path, jax_wheel: JaxWheel) -> None:
    facts = PROBE.collect(ctx_for(jax_cpu_python, jax_wheel("jax==0.10.1")))
    assert (facts.get("jax.version"), facts.get("jax.jaxlib_version")) == ("0.10.1", "0.10.2")
    assert facts.get("jax.requires_jaxlib") == "jaxlib<=0.10.1,>=0.10.1"
    assert facts.get("jax.import_error") == (
        "RuntimeError: jaxlib version 0.10.2 is newer than and incompatible with jax version 0.10.1. "
        "Please update your jax and/or jaxlib packages."
    )
    for name in BACKEND_FACTS:
        assert facts.unknown[name].startswith("import jax failed: RuntimeError: jaxlib version 0.10.2")
    accounted(facts)


@pytest.mark.slow
def test_a_plugin_of_another_release_is_refused_by_jaxlib(jax_cpu_python: Path, jax_wheel: JaxWheel) -> None:
    facts = PROBE.collect(ctx_for(jax_cpu_python, jax_wheel("jax-cuda13-plugin==0.10.1")))
    assert facts.get("jax.cuda_plugin_version") == "0.10.1"
    assert facts.get("jax.import_error") is None  # a warning, not an error: the plugin is left out
    assert facts.get("jax.import_warnings") == [
        "JAX plugin jax_cuda13_plugin version 0.10.1 is installed, but it is not compatible with the installed"
        " jaxlib version 0.10.2, so it will not be used."
    ]


@pytest.mark.slow
def test_in_a_pipeline_run_the_child_waits_for_phase_2(jax_cpu_python: Path) -> None:
    ctx = ctx_for(jax_cpu_python)
    with ctx.handoff.open():
        facts = PROBE.collect(ctx)
        child = ctx.handoff.take(JAX_CHILD)
        assert child is not None and child.result is None  # alive, jax imported, no backend yet
        assert facts.get("jax.version") == "0.10.2"
        assert not any(name in facts.values or name in facts.unknown for name in BACKEND_FACTS)
        child.stop(grace=1.0)
    assert child.result is not None and child.result.returncode == 0  # it ended on its closed stdin


def test_an_interpreter_that_cannot_run(tmp_path: Path) -> None:
    facts = PROBE.collect(ctx_for(tmp_path / "no-such-python"))
    assert facts.reason("jax.installed") is not None and "could not run" in str(facts.reason("jax.installed"))
    accounted(facts)

"""The phase-1 JAX probe on real interpreters: a real CPU-only jax, a real CUDA plugin wheel
installed without its PJRT, and real wheels of two releases that do not match."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import collect
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.probe import FrameworkProbe
from cuda_doctor.jax._child import BACKEND_FACTS
from cuda_doctor.jax.probe import (
    ALL_JAX_FACTS,
    AUTOTUNE_FLAG,
    JAX_CHILD,
    PROBE,
    autotune_cache,
    child_env,
    get_ready,
    is_backend,
    user_settings,
)
from cuda_doctor.jax.smoke_step import is_prepared
from cuda_doctor.smoke.runner import script_source

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


def test_the_child_keeps_the_users_xla_flags_as_they_are() -> None:
    assert "XLA_FLAGS" not in child_env({"HOME": "/root"})  # XLA's autotuning as the user has it
    flags = "--xla_gpu_enable_triton_gemm=false"
    assert child_env({"XLA_FLAGS": flags})["XLA_FLAGS"] == flags


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


@pytest.mark.slow
def test_in_a_pipeline_run_the_backend_comes_up_in_phase_1_beside_the_torch_child(
    jax_cpu_python: Path, tmp_path: Path
) -> None:
    """The framework probe's child and the JAX child both start in phase 1; the JAX child has its
    backend up before phase 1 ends, without being asked for it."""
    log = tmp_path / "starts.log"
    counted = tmp_path / "counted-python"
    counted.write_text(f'#!/bin/sh\necho $$ >> {log}\nexec {jax_cpu_python} "$@"\n')
    counted.chmod(0o755)
    ctx = ctx_for(counted)
    framework = FrameworkProbe(fatbin_cache=tmp_path / "fatbin.json")
    with ctx.handoff.open():
        facts = collect(ctx, [framework, PROBE])
        assert len(log.read_text().split()) == 2  # the torch child and the JAX child, in phase 1
        child = ctx.handoff.take(JAX_CHILD)
        assert child is not None and child.result is None
        record = child.seen(is_backend)
        assert record is not None and record["backend"]["values"]["jax.backend"] == "cpu"
        child.stop(grace=1.0)
    assert facts.get("torch.installed") is False and facts.get("jax.version") == "0.10.2"
    assert child.seen(is_prepared) is None  # JAX has no GPU here: nothing to compile for the smoke run


class OneGpuChild:
    """A JAX child whose backend has one GPU (there is none here): what ``get_ready`` tells it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.on_step: Any = None
        self.records = [{"backend": {"values": {"jax.gpu_count": 1}, "unknown": {}}}, {"prepared": {"seconds": 0.1}}]

    def give_more_time(self, seconds: float) -> None:
        self.limit = seconds

    def wait_for(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        return next((record for record in self.records if wanted(record)), None)

    def send(self, record: dict[str, Any]) -> bool:
        self.sent.append(record)
        return True


def test_the_smoke_step_is_compiled_in_phase_1_only_when_a_smoke_run_follows() -> None:
    child = OneGpuChild()
    facts = Facts()
    get_ready(ProbeContext(smoke=False), child, facts, 60)
    assert child.sent == []  # check --no-smoke: the read-only facts only
    get_ready(ProbeContext(smoke=True, smoke_timeout=30), child, facts, 60)
    (order,) = child.sent
    assert order["run"] == script_source("jax")
    assert json.loads(order["argv"][0]) == {"size": 4096, "prepare": True}
    assert facts.values == {} and facts.unknown == {}  # the backend's facts are phase 2's


# -- XLA's autotuning results, kept between checks ---------------------------------------------------
def test_xla_keeps_its_autotuning_results_in_cuda_doctors_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = autotune_cache({"XLA_FLAGS": "--xla_gpu_enable_triton_gemm=false"})
    assert folder == str(tmp_path / "cuda-doctor" / "xla-autotune")
    assert not (tmp_path / "cuda-doctor").exists()  # made by the child, and only where jax is installed


def test_the_users_own_autotuning_folder_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert autotune_cache({"XLA_FLAGS": f"{AUTOTUNE_FLAG}=/data/tuned"}) is None
    assert not (tmp_path / "cuda-doctor").exists()


@pytest.mark.parametrize("where", ["a file/below", "with space"])
def test_no_autotuning_folder_where_it_cannot_be_made_or_named(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / where))
    assert autotune_cache({}) is None


def test_the_child_makes_the_autotuning_folder_and_adds_it_to_the_users_xla_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_doctor.jax import _child

    folder = tmp_path / "cuda-doctor" / "xla-autotune"
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false")
    _child.use_autotune_cache(str(folder))
    assert os.environ["XLA_FLAGS"] == f"--xla_gpu_enable_triton_gemm=false {AUTOTUNE_FLAG}={folder}"
    assert folder.is_dir()
    monkeypatch.delenv("XLA_FLAGS")
    (tmp_path / "a file").write_text("")
    _child.use_autotune_cache(str(tmp_path / "a file" / "xla-autotune"))  # cannot be made: not named
    _child.use_autotune_cache(None)
    assert "XLA_FLAGS" not in os.environ


@pytest.mark.parametrize(
    ("interpreter", "made"), [("plain_python", False), pytest.param("jax_cpu_python", True, marks=pytest.mark.slow)]
)
def test_the_autotuning_folder_is_made_only_where_jax_is_installed(
    interpreter: str, made: bool, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    ctx = ctx_for(request.getfixturevalue(interpreter))
    with ctx.handoff.open():
        facts = collect(ctx, [PROBE])
    assert facts.get("jax.installed") is made
    assert (tmp_path / "cuda-doctor" / "xla-autotune").is_dir() is made


@pytest.mark.parametrize(
    "failure", [PermissionError(13, "Permission denied"), OSError("no folder to keep a cache in (no home folder)")]
)
def test_no_autotuning_folder_where_the_cache_cannot_be_found(
    failure: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cuda_doctor.jax.probe as probe

    def cache_dir() -> Path:
        raise failure

    monkeypatch.setattr(probe, "cache_dir", cache_dir)
    assert autotune_cache({}) is None  # the JAX probe goes on without one

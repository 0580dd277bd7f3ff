"""check and smoke end to end with real JAX wheels under the fake nvidia-smi of an H200: a CPU-only
jax, a CUDA 13 plugin on an R535 driver, and jax and jaxlib of two releases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
JaxWheel = Callable[[str], Path]
SmiEnv = Callable[..., dict[str, str]]


def doctor(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_doctor", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def results(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["rule"]: r for r in report["results"] if r.get("subject") in (None, "", "GPU 0")}


@pytest.mark.slow
def test_cpu_only_jax_on_an_h200_fails_with_the_plugin_this_driver_runs(
    doctor_env: SmiEnv, jax_cpu_python: Path, tmp_path: Path
) -> None:
    log = tmp_path / "starts.log"
    counted = tmp_path / "counted-python"
    counted.write_text(f'#!/bin/sh\necho $$ >> {log}\nexec {jax_cpu_python} "$@"\n')
    counted.chmod(0o755)
    env = doctor_env()
    proc = doctor(["check", "--format", "json", "--python", str(counted)], env, tmp_path)
    report = json.loads(proc.stdout)
    v = report["facts"]["values"]
    assert (v["jax.version"], v["jax.jaxlib_version"], v["jax.cuda_plugin"]) == ("0.10.2", "0.10.2", None)
    assert (v["jax.backend"], v["jax.gpu_count"]) == ("cpu", 0)
    found = results(report)
    assert found["CD241"]["status"] == "fail"
    assert (
        "is CPU-only (no jax-cuda12-plugin or jax-cuda13-plugin) on a machine with 1 NVIDIA GPU(s)"
        in found["CD241"]["message"]
    )
    # the pip of the interpreter given with --python, as every fix words it
    assert found["CD241"]["commands"] == [f'{counted} -m pip install -U "jax[cuda13]"']
    assert "jax[cuda12] also runs here (drivers ≥ 525.60.13)" in found["CD241"]["fix"]
    assert found["CD243"]["status"] == "pass"
    # the check that --python is a Python interpreter, the torch probe's child, the compile toolchain
    # probe's, the JAX child (phase 1 and 2) and the driver-level smoke child: jax imported once
    assert len(log.read_text().split()) == 5
    checklist = doctor(["check", "--python", str(jax_cpu_python)], env, tmp_path).stdout
    assert "jax 0.10.2 (CPU-only)" in checklist.splitlines()[0]
    markdown = doctor(["check", "--format", "markdown", "--python", str(jax_cpu_python)], env, tmp_path).stdout
    assert "| `jax.version` | 0.10.2 |" in markdown and "| `jax.backend` | cpu |" in markdown


@pytest.mark.slow
def test_a_cuda13_plugin_on_an_r535_driver(
    doctor_env: SmiEnv, jax_cpu_python: Path, jax_wheel: JaxWheel, r535_fixtures: Path, tmp_path: Path
) -> None:
    plugin = jax_wheel("jax-cuda13-plugin==0.10.2")
    env = doctor_env(r535_fixtures, PYTHONPATH=f"{plugin}{os.pathsep}{TESTS.parent}")
    proc = doctor(["check", "--format", "json", "--python", str(jax_cpu_python)], env, tmp_path)
    report = json.loads(proc.stdout)
    assert report["facts"]["values"]["driver.version"] == "535.104.05"
    found = results(report)
    assert found["CD242"]["status"] == "fail"
    assert found["CD242"]["message"] == (
        "jax-cuda13-plugin 0.10.2 does not run here: it needs a driver for CUDA 13 (≥ 580.65.06);"
        " driver 535.104.05 supports CUDA 12.2"
    )
    assert found["CD242"]["commands"] == [
        f"{jax_cpu_python} -m pip uninstall -y jax-cuda13-plugin jax-cuda13-pjrt",
        f'{jax_cpu_python} -m pip install -U "jax[cuda12]"',
    ]
    # installed with --no-deps, the plugin also lacks its PJRT: JAX has no CUDA backend at all
    assert found["CD243"]["status"] == "fail"
    assert "installed without its PJRT (jax-cuda13-pjrt==0.10.2)" in found["CD243"]["message"]
    assert proc.returncode == 1


@pytest.mark.slow
def test_jax_and_jaxlib_of_two_releases(
    doctor_env: SmiEnv, jax_cpu_python: Path, jax_wheel: JaxWheel, tmp_path: Path
) -> None:
    older = jax_wheel("jax==0.10.1")
    env = doctor_env(PYTHONPATH=f"{older}{os.pathsep}{TESTS.parent}")
    proc = doctor(["check", "--format", "json", "--python", str(jax_cpu_python)], env, tmp_path)
    found = results(json.loads(proc.stdout))
    assert found["CD243"]["status"] == "fail"
    assert found["CD243"]["message"] == (
        "import jax fails: RuntimeError: jaxlib version 0.10.2 is newer than and incompatible with jax version"
        " 0.10.1. Please update your jax and/or jaxlib packages."
    )
    assert found["CD243"]["commands"] == [f'{jax_cpu_python} -m pip install "jax==0.10.2" "jaxlib==0.10.2"']
    checklist = doctor(["check", "--python", str(jax_cpu_python)], env, tmp_path).stdout
    assert "jax: import failed (RuntimeError: jaxlib version 0.10.2 is newer" in checklist.splitlines()[0]


@pytest.mark.slow
def test_smoke_shows_the_jax_facts(doctor_env: SmiEnv, jax_cpu_python: Path, tmp_path: Path) -> None:
    env = doctor_env()
    proc = doctor(["smoke", "-v", "--format", "json", "--python", str(jax_cpu_python)], env, tmp_path)
    report = json.loads(proc.stdout)
    v = report["facts"]["values"]
    assert (v["jax.version"], v["jax.backend"]) == ("0.10.2", "cpu")
    assert v["smoke.jax_level.status"] == "skipped"
    found = results(report)
    assert found["CD251"]["status"] == "skipped"
    assert not any(rule.startswith("CD24") for rule in found)  # the smoke command judges the smoke rules only

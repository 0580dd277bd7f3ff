"""``check`` without ``--python``, as the README's first command leaves it: cuda-doctor in an
environment of its own, the one the user trains with activated; and ``--python`` that is no Python."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from cuda_doctor.core.interpreter import frameworks_here
from tests.conftest import run_doctor

OWN_BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(
    bool(frameworks_here()), reason="the test interpreter has a framework: it would be inspected itself"
)


def env(**extra: str) -> dict[str, str]:
    """No GPU, no driver, and on PATH only cuda-doctor's own environment (which is skipped)."""
    base = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    return {**base, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": str(OWN_BIN), **extra}


def test_the_activated_environment_with_torch_is_checked(torch_cpu_python: Path, tmp_path: Path) -> None:
    venv = str(torch_cpu_python.parent.parent)
    done = run_doctor(["check", "--no-smoke"], env=env(VIRTUAL_ENV=venv), cwd=tmp_path)
    header = done.stdout.split("\n\n")[0].splitlines()  # the lines above the first section
    assert header[0].startswith("torch 2.13.0+cpu (CPU-only)"), done.stdout
    (note,) = [line for line in header if line.startswith("checked ")]
    assert note.startswith(
        f"checked {torch_cpu_python}: the activated virtual environment (VIRTUAL_ENV={venv}), which has torch;"
    )
    assert "has no torch, TensorFlow or JAX" in note
    as_json = run_doctor(["check", "--no-smoke", "--format", "json"], env=env(VIRTUAL_ENV=venv), cwd=tmp_path)
    facts = json.loads(as_json.stdout)["facts"]["values"]
    assert facts["framework.interpreter"] == str(torch_cpu_python)
    assert facts["framework.interpreter_how"] == "found"
    assert facts["framework.python"].startswith(venv)  # what the framework probe's child reported


def test_nothing_found_says_so_and_names_the_option(tmp_path: Path) -> None:
    done = run_doctor(["check", "--no-smoke"], env=env(), cwd=tmp_path)
    header = done.stdout.split("\n\n")[0].splitlines()
    (note,) = [line for line in header if line.startswith("checked ")]
    assert "no other one with a framework was found" in note
    assert note.endswith("--python PATH names the one you train with")


def test_python_given_is_not_searched_for(torch_cpu_python: Path, tmp_path: Path) -> None:
    args = ["check", "--no-smoke", "--format", "json", "--python", str(torch_cpu_python)]
    facts = json.loads(run_doctor(args, env=env(), cwd=tmp_path).stdout)["facts"]["values"]
    assert (facts["framework.interpreter"], facts["framework.interpreter_how"]) == (str(torch_cpu_python), "given")


@pytest.mark.parametrize("command", [["check"], ["smoke"], ["facts"]])
def test_python_that_is_no_interpreter_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    done = run_doctor([*command, "--python", str(passwd)], env=env(), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == f"cuda-doctor: error: --python {passwd}: not executable, so not a Python interpreter"
    assert done.stdout == ""  # refused before anything was probed

"""A real interpreter with Lightning and transformers beside the CPU-only torch of
``torch_cpu_python``, cached in ``.cache/trainers-venv``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TORCH_CPU_VERSION, _install, _ready

#: The trainers the callbacks are tested with (pyproject's ``test-trainers`` extra names the lowest).
TRAINERS = ("lightning==2.6.6", "transformers==5.18.0", "accelerate==1.15.0")


def cuda_doctor_needs() -> list[str]:
    """What cuda-doctor itself needs in that interpreter: pyproject's dependencies."""
    from cuda_doctor.base.tomlcompat import tomllib

    with open(REPO / "pyproject.toml", "rb") as handle:
        return list(tomllib.load(handle)["project"]["dependencies"])


@pytest.fixture(scope="session")
def trainers_python(torch_cpu_python: Path) -> Path:
    """The trainers' venv sees the torch venv's packages through a ``.pth`` file, so that pip
    finds torch installed and the 700 MB are not installed twice."""
    venv = REPO / ".cache" / "trainers-venv"
    python = venv / "bin" / "python"
    needs = cuda_doctor_needs()
    stamp = " ".join((*TRAINERS, *needs, f"torch=={TORCH_CPU_VERSION}", str(torch_cpu_python)))
    if _ready(venv, stamp) and python.exists():
        return python
    _install([sys.executable, "-m", "venv", "--clear", str(venv)], "a venv for the trainers")
    torch_site = subprocess.run(
        [str(torch_cpu_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    own_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    (Path(own_site) / "torch-cpu-venv.pth").write_text(torch_site + "\n", encoding="utf-8")
    _install([str(python), "-m", "pip", "install", "--quiet", *TRAINERS, *needs], " ".join(TRAINERS))
    (venv / ".ready").write_text(stamp + "\n", encoding="utf-8")
    return python

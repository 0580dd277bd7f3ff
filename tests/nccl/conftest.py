"""A real CPU-only torch for the multi-process tests (gloo backend), in a cached venv."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cuda_doctor.base.process import run_command

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "h200x2"
_CANDIDATES = (".cache/torch-cpu-venv", ".cache/torch-cpu-venv-nccl")
_OWN = REPO / ".cache" / "torch-cpu-venv-nccl"


def _has_torch(python: Path) -> bool:
    return python.exists() and run_command([str(python), "-c", "import torch"], timeout=120).ok


@pytest.fixture(scope="session")
def torch_python() -> str:
    """Path of an interpreter with torch (CPU build): an existing cached venv, or ours, built once."""
    for rel in _CANDIDATES:
        python = REPO / rel / "bin" / "python"
        if _has_torch(python):
            return str(python)
    _OWN.parent.mkdir(parents=True, exist_ok=True)
    # flock serialises concurrent builders of the same venv
    script = (
        f"[ -x {_OWN}/bin/python ] || {sys.executable} -m venv {_OWN}; "
        f"{_OWN}/bin/python -c 'import torch' 2>/dev/null || "
        f"{_OWN}/bin/pip install -q torch==2.13.0"
    )
    result = run_command(["flock", str(_OWN) + ".lock", "sh", "-c", script], timeout=900, env=dict(os.environ))
    python = _OWN / "bin" / "python"
    if not _has_torch(python):
        pytest.skip(f"no CPU torch available for the gloo tests: {result.error or 'install failed'}")
    return str(python)

"""Fixtures for the JAX tests: the fake nvidia-smi of an H200 on its own driver or on an R535 one,
and the environment a ``cuda-doctor`` process or a JAX child runs in."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
#: A driver of the R535 branch (CUDA 12.2): it runs the CUDA 12 plugin, not the CUDA 13 one.
R535 = ("535.104.05", "12.2")


SmiEnv = Callable[..., dict[str, str]]


def smi_env(fake_nvidia_smi: Any, fixtures: Path | None = None, **extra: str) -> dict[str, str]:
    """A machine-independent environment with the fake nvidia-smi first on PATH and NVML off."""
    env = dict(fake_nvidia_smi.ctx().env)
    if fixtures is not None:
        env["FAKE_NVIDIA_SMI_FIXTURES"] = str(fixtures)
    env["CUDA_DOCTOR_DISABLE_NVML"] = "1"  # the nvidia-smi path, whatever this host has
    env["HOME"] = os.environ.get("HOME", "/root")
    env["XDG_CACHE_HOME"] = os.environ.get("XDG_CACHE_HOME", str(REPO / ".cache"))
    env["PYTHONPATH"] = str(REPO)  # cuda-doctor from this tree
    env.update(extra)
    return env


@pytest.fixture
def r535_fixtures(tmp_path: Path) -> Path:
    """The H200's nvidia-smi recordings with the driver an R535 machine reports."""
    folder = tmp_path / "h200-r535"
    shutil.copytree(TESTS / "fixtures" / "h200", folder)
    xml = folder / "nvidia-smi-q.xml"
    text = xml.read_text().replace(
        "<driver_version>580.159.04</driver_version>", f"<driver_version>{R535[0]}</driver_version>"
    )
    xml.write_text(text.replace("<cuda_version>13.0</cuda_version>", f"<cuda_version>{R535[1]}</cuda_version>"))
    csv = folder / "query-gpu.csv"
    csv.write_text(csv.read_text().replace("580.159.04", R535[0]))
    return folder


@pytest.fixture
def doctor_env(fake_nvidia_smi: Any) -> SmiEnv:
    """``smi_env`` bound to this test's fake nvidia-smi: ``doctor_env(fixtures=None, **extra)``."""
    return lambda fixtures=None, **extra: smi_env(fake_nvidia_smi, fixtures, **extra)

"""Fixtures shared across test folders: recorded GPU outputs and a fake ``nvidia-smi`` on PATH."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuda_doctor.probes.base import ProbeContext

TESTS = Path(__file__).resolve().parent
H200 = TESTS / "fixtures" / "h200"


@pytest.fixture
def h200_dir() -> Path:
    """Recordings of a real H200 machine (driver 580.159.04, CUDA 13.0); see its README."""
    return H200


@dataclass(frozen=True)
class FakeNvidiaSmi:
    """A real ``nvidia-smi`` executable (tests/fakes/nvidia_smi.py) first on a private PATH."""

    path: Path
    pidfile: Path
    root: Path

    def ctx(self, mode: str = "ok", timeout: float = 10.0) -> ProbeContext:
        env = {
            "PATH": f"{self.path.parent}{os.pathsep}{os.defpath}",
            "LANG": "C.UTF-8",
            "FAKE_NVIDIA_SMI_MODE": mode,
            "FAKE_NVIDIA_SMI_FIXTURES": str(H200),
            "FAKE_NVIDIA_SMI_PIDFILE": str(self.pidfile),
        }
        return ProbeContext(root=self.root, env=env, timeout=timeout)


@pytest.fixture
def fake_nvidia_smi(tmp_path: Path) -> FakeNvidiaSmi:
    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    source = (TESTS / "fakes" / "nvidia_smi.py").read_text(encoding="utf-8")
    exe.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    root = tmp_path / "root"
    root.mkdir()
    return FakeNvidiaSmi(exe, tmp_path / "nvidia-smi.pid", root)

"""Fixtures shared across test folders: recorded GPU outputs and a fake ``nvidia-smi`` on PATH."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cuda_doctor.probes.base import ProbeContext

TESTS = Path(__file__).resolve().parent
H200 = TESTS / "fixtures" / "h200"


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The parsed-TOML cache of this test run (and of the processes it starts), not the user's."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield cache
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


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


def _load_fake(name: str) -> ModuleType:
    # loaded by path so it works whatever pytest's import mode
    spec = importlib.util.spec_from_file_location(f"_cuda_doctor_fakes_{name}", TESTS / "fakes" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def make_nvml() -> Iterator[Callable[..., Any]]:
    """Build a fake ``pynvml`` (tests/fakes/fake_pynvml.py) answering with the H200 readings.

    ``readings`` replaces some of those readings; other keyword arguments set FakeNvml's fields.
    Any ``hang`` event is released at teardown so no abandoned worker thread outlives the test.
    """
    fakes = _load_fake("fake_pynvml")
    recorded = fakes.h200_readings(H200 / "nvml.txt")
    made: list[Any] = []

    def make(readings: dict[str, Any] | None = None, **options: Any) -> Any:
        fake = fakes.FakeNvml(readings={**recorded, **(readings or {})}, **options)
        made.append(fake)
        return fake

    yield make
    for fake in made:
        if isinstance(fake.hang, threading.Event):
            fake.hang.set()

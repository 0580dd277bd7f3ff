"""Shared fixtures for probe tests: real interpreters, fake executables, recorded environments."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
TORCH_CPU_VERSION = "2.13.0"


def parse_env_recording(path: Path) -> dict[str, str]:
    """``NAME=value`` lines of an env recording (section headers like ``== env`` skipped)."""
    env: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("==") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        env[name] = value
    return env


@pytest.fixture
def h200_env() -> dict[str, str]:
    return parse_env_recording(FIXTURES / "env" / "h200-env.txt")


@pytest.fixture
def make_executable(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a ``#!/bin/sh`` script named ``name`` into ``tmp_path/bin`` and return its path."""

    def make(name: str, body: str) -> Path:
        bindir = tmp_path / "bin"
        bindir.mkdir(exist_ok=True)
        path = bindir / name
        path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    return make


@pytest.fixture(scope="session")
def plain_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real interpreter with nothing installed: a fresh venv without pip."""
    venv = tmp_path_factory.mktemp("plain-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv / "bin" / "python"


@pytest.fixture(scope="session")
def torch_cpu_python() -> Path:
    """A real interpreter with a real CPU-only torch, cached in ``.cache/torch-cpu-venv``.

    Building it takes a while the first time; afterwards the ready marker makes it instant.
    """
    venv = REPO / ".cache" / "torch-cpu-venv"
    python = venv / "bin" / "python"
    marker = venv / ".ready"
    ready = marker.is_file() and marker.read_text(encoding="utf-8").strip() == TORCH_CPU_VERSION
    if ready and python.exists():
        return python
    steps = (
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", f"torch=={TORCH_CPU_VERSION}"],
    )
    for argv in steps:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"could not build a CPU-only torch venv ({' '.join(argv[:4])}): {exc}")
        if done.returncode != 0:
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
            pytest.skip(f"could not install torch=={TORCH_CPU_VERSION} into a venv (exit {done.returncode}): {tail[0]}")
    marker.write_text(TORCH_CPU_VERSION + "\n", encoding="utf-8")
    return python


@pytest.fixture
def base_env() -> dict[str, str]:
    """A minimal, machine-independent environment for child processes."""
    return {"PATH": os.defpath, "LANG": "C.UTF-8"}

"""Shared fixtures for probe tests: real interpreters, fake executables, recorded environments."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


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


@pytest.fixture
def base_env() -> dict[str, str]:
    """A minimal, machine-independent environment for child processes."""
    return {"PATH": os.defpath, "LANG": "C.UTF-8"}

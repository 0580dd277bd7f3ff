"""Smoke-test fixtures: a fake libcuda.so.1 built from C, and interpreters without torch."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def fake_libcuda_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``libcuda.so.1`` compiled from fake_libcuda.c."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (cc/gcc) to build the fake libcuda.so.1")
    out = tmp_path_factory.mktemp("libcuda")
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(out / "libcuda.so.1"), str(HERE / "fake_libcuda.c")],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture
def fake_root(tmp_path: Path, fake_libcuda_dir: Path) -> Path:
    """A file-system root whose /usr/lib/x86_64-linux-gnu holds the fake driver library."""
    lib = tmp_path / "root" / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    shutil.copy(fake_libcuda_dir / "libcuda.so.1", lib / "libcuda.so.1")
    return tmp_path / "root"


@pytest.fixture
def python_without_torch(tmp_path: Path) -> str:
    """An interpreter that cannot import torch: this Python with site-packages turned off."""
    wrapper = tmp_path / "python-no-site"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.fixture
def clean_env() -> dict[str, str]:
    """The environment for smoke children, without the hang switch a caller may have set."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DOCTOR_SMOKE_TEST_HANG"}
    env.pop("LD_LIBRARY_PATH", None)
    return env

"""Fixtures shared across test folders: recorded GPU outputs and a fake ``nvidia-smi`` on PATH."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cuda_doctor.core.probe import ProbeContext

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
H200 = TESTS / "fixtures" / "h200"
#: Eight GPUs made from the H200 recordings (see its README: derived, not recorded).
H200X8 = TESTS / "fixtures" / "h200x8"
TORCH_CPU_VERSION = "2.13.0"
#: The newest CPU-only jax for Python 3.11 (jax 0.11 needs 3.12): 3.2 MB + jaxlib 85.4 MB.
JAX_CPU = ("jax==0.10.2", "jaxlib==0.10.2")


def gone(pid: int) -> bool:
    """No such process any more, or only its zombie (waiting for whoever adopted it to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def group_gone(pgid: int) -> bool:
    """No live process is left in process group ``pgid``."""
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return False
    return True


def wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Whether ``condition`` became true within ``seconds`` (polled)."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def run_doctor(
    args: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    first_on_path: tuple[Path, ...] = (),
    timeout: float = 180.0,
) -> subprocess.CompletedProcess[str]:
    """``python -m cuda_doctor ARGS`` as a real process of this checkout: ``env`` (this process's
    when not given) with ``first_on_path`` and the checkout put before its PYTHONPATH."""
    full_env = dict(os.environ if env is None else env)
    path = [*map(str, first_on_path), str(REPO), full_env.get("PYTHONPATH", "")]
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    return subprocess.run(
        [sys.executable, "-m", "cuda_doctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def with_driver_library(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` with a file the loader opens as ``libnvidia-ml.so.1`` first on LD_LIBRARY_PATH, for
    a process that stands for a machine with a driver (the fake ``pynvml`` of
    tests/fakes/pynvml_h200, a broken binding): such a machine has the library, and without one
    cuda-doctor does not import the binding at all.  The file is a copy of a shared object every
    CPython has (its ctypes extension), without NVML's functions."""
    import _ctypes

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_ctypes.__file__, folder / "libnvidia-ml.so.1")
    path = os.pathsep.join(filter(None, [str(folder), env.get("LD_LIBRARY_PATH", "")]))
    return {**env, "LD_LIBRARY_PATH": path}


def wait_for_file(path: Path, seconds: float = 60.0) -> str:
    """The text of ``path`` once a process has written it whole (ending in a newline)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written within {seconds:g} s")


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
def no_home_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user without a home folder: no XDG_CACHE_HOME, no HOME, and no entry in the user database
    (a container run under an arbitrary UID), so that ``Path.home()`` raises."""
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)


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

    def ctx(self, mode: str = "ok", timeout: float = 10.0, fixtures: Path = H200) -> ProbeContext:
        env = {
            "PATH": f"{self.path.parent}{os.pathsep}{os.defpath}",
            "LANG": "C.UTF-8",
            "FAKE_NVIDIA_SMI_MODE": mode,
            "FAKE_NVIDIA_SMI_FIXTURES": str(fixtures),
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
    _install([sys.executable, "-m", "venv", "--clear", str(venv)], "a venv for a CPU-only torch")
    wheel = f"torch=={TORCH_CPU_VERSION}"
    _install([str(python), "-m", "pip", "install", "--quiet", wheel], wheel)
    marker.write_text(TORCH_CPU_VERSION + "\n", encoding="utf-8")
    return python


@pytest.fixture(scope="session")
def registry() -> Any:
    """Real wheels and wheel metadata from the package registry, cached across runs
    (tests/artefacts.py); a test that needs one skips with the reason when it cannot be had."""
    from tests.artefacts import Registry, cache_root

    return Registry(cache_root())


@pytest.fixture(scope="session")
def unpacked(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``unpacked("nvidia-cufile==1.15.1.6")``: a folder with that real wheel unpacked into it,
    as pip would install it into a site-packages (one folder per wheel, once per test run)."""
    from tests.artefacts import unpack

    made: dict[str, Path] = {}

    def make(spec: str) -> Path:
        if spec not in made:
            made[spec] = unpack(registry.wheel(spec), tmp_path_factory.mktemp(spec.replace("==", "-")))
        return made[spec]

    return make


def _install(argv: list[str], what: str) -> None:
    """Run one install step; skip the test (with pip's last line) when it cannot be done here."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"could not install {what}: {exc}")
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
        pytest.skip(f"could not install {what} (exit {done.returncode}): {tail[0]}")


def _ready(folder: Path, stamp: str) -> bool:
    marker = folder / ".ready"
    return marker.is_file() and marker.read_text(encoding="utf-8").strip() == stamp


@pytest.fixture(scope="session")
def jax_cpu_python() -> Path:
    """A real interpreter with a real CPU-only jax and jaxlib, cached in ``.cache/jax-cpu-venv``."""
    venv = REPO / ".cache" / "jax-cpu-venv"
    python = venv / "bin" / "python"
    stamp = " ".join(JAX_CPU)
    if _ready(venv, stamp) and python.exists():
        return python
    _install([sys.executable, "-m", "venv", "--clear", str(venv)], "a venv for jax")
    _install([str(python), "-m", "pip", "install", "--quiet", *JAX_CPU], stamp)
    (venv / ".ready").write_text(stamp + "\n", encoding="utf-8")
    return python


@pytest.fixture(scope="session")
def jax_wheel(unpacked: Callable[[str], Path]) -> Callable[[str], Path]:
    """A folder holding one real wheel, unpacked as ``pip install --no-deps --target`` would
    (``"jax-cuda13-plugin==0.10.2"``): put first on PYTHONPATH, it adds to or shadows what the jax
    venv has (a CUDA plugin without its 124 MB PJRT, another release of jax)."""
    return unpacked


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
    return parse_env_recording(TESTS / "fixtures" / "env" / "h200-env.txt")


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

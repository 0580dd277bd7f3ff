"""Without any ``libnvidia-ml.so.1`` for the loader to find, the binding is not imported: it
could only fail the same way, and its import costs a fast check 30-40 ms.  The facts are those
the binding's own failure gave."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import pytest

from cuda_doctor.gpu.nvml import binding
from tests.conftest import run_doctor, with_driver_library


def _loader_finds_nvml() -> bool:
    try:
        ctypes.CDLL(binding.LIBRARY)
    except OSError:
        return False
    return True


needs_no_nvml = pytest.mark.skipif(_loader_finds_nvml(), reason="this machine's loader finds an NVML library")


def _spy_binding(folder: Path, marker: Path) -> Path:
    """A ``pynvml`` that says it was imported (in ``marker``), then fails as a broken one would."""
    folder.mkdir()
    source = f"open({str(marker)!r}, 'w').close()\nraise ImportError('the spy binding')\n"
    (folder / "pynvml.py").write_text(source, encoding="utf-8")
    return folder


def _fast_check(tmp_path: Path, env: dict[str, str], binding_folder: Path) -> dict[str, object]:
    env = {key: value for key, value in env.items() if key != "CUDA_DOCTOR_DISABLE_NVML"}
    proc = run_doctor(["check", "--fast", "--format", "json"], cwd=tmp_path, env=env, first_on_path=(binding_folder,))
    assert proc.returncode in (0, 1), proc.stderr
    values: dict[str, object] = json.loads(proc.stdout)["facts"]["values"]
    return values


@needs_no_nvml
def test_no_library_no_import_of_the_binding(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    values = _fast_check(tmp_path, dict(os.environ), _spy_binding(tmp_path / "spy", marker))
    assert not marker.exists()
    assert values["driver.status"] == "library_not_found"
    assert values["nvml.error"] == "libnvidia-ml.so.1 not found (NVML Shared Library Not Found)"


@needs_no_nvml
def test_with_a_library_the_binding_is_imported_and_its_failure_named(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    env = with_driver_library(dict(os.environ), tmp_path / "driver")
    values = _fast_check(tmp_path, env, _spy_binding(tmp_path / "spy", marker))
    assert marker.exists()
    assert "the spy binding" in str(values["nvml.error"])


@pytest.fixture
def unlisted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No NVML library in the loader's cache or on LD_LIBRARY_PATH: the loader is asked."""
    monkeypatch.setattr(binding, "LOADER_CACHE", str(tmp_path / "no-cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)


def test_a_library_in_the_loaders_cache_or_path_is_not_looked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def looked_for(name: str) -> str:
        raise AssertionError("the loader was asked")

    monkeypatch.setattr(binding, "loader_error", looked_for)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(b"glibc-ld.so.cache1.1\x00libcuda.so.1\x00libnvidia-ml.so.1\x00/usr/lib/libnvidia-ml.so.1\x00")
    monkeypatch.setattr(binding, "LOADER_CACHE", str(cache))
    assert binding.library_missing() is None
    monkeypatch.setattr(binding, "LOADER_CACHE", str(tmp_path / "no-cache"))
    env = with_driver_library({}, tmp_path / "driver")
    monkeypatch.setenv("LD_LIBRARY_PATH", env["LD_LIBRARY_PATH"])
    assert binding.library_missing() is None


@pytest.mark.usefixtures("unlisted")
def test_a_library_the_loader_finds_is_not_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "loader_error", lambda name: None)
    assert binding.library_missing() is None


@pytest.mark.usefixtures("unlisted")
def test_a_library_found_but_unloadable_is_not_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    said = "/usr/lib/libnvidia-ml.so.1: invalid ELF header"
    monkeypatch.setattr(binding, "loader_error", lambda name: said)
    assert binding.library_missing() is None  # the binding's own failure names the broken file


@pytest.mark.usefixtures("unlisted")
def test_no_library_reads_as_the_bindings_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    said = "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
    monkeypatch.setattr(binding, "loader_error", lambda name: said)
    missing = binding.library_missing()
    assert missing is not None
    assert missing.status == "library_not_found"
    assert str(missing) == "libnvidia-ml.so.1 not found (NVML Shared Library Not Found)"


def test_a_fifo_in_place_of_the_loaders_cache_is_not_waited_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "ld.so.cache"
    os.mkfifo(fifo)
    monkeypatch.setattr(binding, "LOADER_CACHE", str(fifo))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    answers: list[bool] = []
    reader = threading.Thread(target=lambda: answers.append(binding._listed_for_loader(binding.LIBRARY)), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # release the blocked open, so that the test ends
        with open(fifo, "wb"):
            pass
    assert answers == [False]  # not listed: the loader itself is asked

"""Real artefacts from the package registry for the library, pin and fatbin tests, cached.

Wheels come through ``pip download`` (the configured indexes, PyPI among them); a wheel's
``METADATA`` alone comes from PyPI's PEP 658 ``.metadata`` file, for wheels too large to fetch
(torch, torchvision).  Everything lands in ``$CUDA_DOCTOR_TEST_CACHE`` (default
``~/.cache/cuda-doctor-tests``) and is fetched once; a test that needs something that cannot be
fetched is skipped with the reason (offline machine).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest

SIMPLE = "https://pypi.org/simple/{name}/"
TIMEOUT = 120


def cache_root() -> Path:
    return Path(os.environ.get("CUDA_DOCTOR_TEST_CACHE") or Path.home() / ".cache" / "cuda-doctor-tests")


class Registry:
    """The cached registry downloads of this test run."""

    def __init__(self, root: Path) -> None:
        self.wheels = root / "wheels"
        self.metadata = root / "metadata"

    def wheel(self, spec: str) -> Path:
        """The wheel file of ``name==version`` for this machine (downloaded once)."""
        name, _, version = spec.partition("==")
        stem = name.replace("-", "_").lower() + "-" + version
        found = sorted(p for p in self.wheels.glob("*.whl") if p.name.lower().startswith(stem + "-"))
        if found:
            return found[0]
        self.wheels.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", spec]
        try:
            done = subprocess.run([*argv, "-d", str(self.wheels)], capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip download {spec} took more than {TIMEOUT} s (offline?)")
        found = sorted(p for p in self.wheels.glob("*.whl") if p.name.lower().startswith(stem + "-"))
        if done.returncode != 0 or not found:
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no wheel"]
            pytest.skip(f"cannot download {spec} from the package registry (offline?): {tail[0]}")
        return found[0]

    def wheel_metadata(self, name: str, filename: str) -> Path:
        """The METADATA of one wheel file on PyPI, from its PEP 658 ``.metadata`` (not the wheel)."""
        target = self.metadata / (filename + ".metadata")
        if target.is_file():
            return target
        try:
            index = _get(SIMPLE.format(name=name), "application/vnd.pypi.simple.v1+json")
            entry = next(f for f in json.loads(index)["files"] if f["filename"] == filename)
            try:
                data = _get(entry["url"] + ".metadata", "*/*")
            except FileNotFoundError:  # no PEP 658 file for this wheel: its METADATA member, by ranges
                data = _zip_member(entry["url"], int(entry["size"]), ".dist-info/METADATA")
        except (OSError, ValueError, StopIteration, KeyError) as exc:
            pytest.skip(f"cannot read the metadata of {filename} from PyPI (offline?): {exc}")
        self.metadata.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
        return target


def _get(url: str, accept: str, extra: dict[str, str] | None = None) -> bytes:
    headers = {"Accept": accept, "User-Agent": "cuda-doctor-tests", **(extra or {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise FileNotFoundError(url) from exc
        raise OSError(str(exc)) from exc
    except urllib.error.URLError as exc:
        raise OSError(str(exc)) from exc


class _RangeFile(io.RawIOBase):
    """A remote file read by HTTP byte ranges: what zipfile needs to read one member."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.position = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.position, 2: self.size}[whence]
        self.position = base + offset
        return self.position

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.size - self.position)
        if count <= 0:
            return 0
        span = {"Range": f"bytes={self.position}-{self.position + count - 1}"}
        data = _get(self.url, "*/*", span)[:count]
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)


def _zip_member(url: str, size: int, suffix: str) -> bytes:
    with zipfile.ZipFile(io.BufferedReader(_RangeFile(url, size), buffer_size=1 << 16)) as archive:
        name = next(n for n in archive.namelist() if n.endswith(suffix))
        return archive.read(name)


def unpack(wheel: Path, site: Path) -> Path:
    """Install a wheel the plain way (unpack it; its RECORD lists the files) into ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


def install_target(wheel: Path, target: Path) -> Path:
    """``pip install --no-deps --target`` of a wheel file: what users do to shadow a package."""
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        "--target",
        str(target),
        str(wheel),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return target


def metadata_only(metadata: Path, site: Path, name: str, version: str) -> Path:
    """A distribution that is only its real METADATA (what a pin check reads), in ``site``."""
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_bytes(metadata.read_bytes())
    (folder / "RECORD").write_text("", encoding="utf-8")
    return folder

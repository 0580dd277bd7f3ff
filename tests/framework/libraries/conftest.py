"""Environments for the library tests: real wheels and real metadata in site folders, and a
stand-in for torch's CUDA loader (the one thing here that is not the real package)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.artefacts import metadata_only, unpack
from tests.conftest import base_env

__all__ = ["base_env"]  # the probe tests' environment, used here as well (plain_python is shared by all)

TORCH_213 = ("torch", "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl")
TORCHVISION_026 = ("torchvision", "torchvision-0.26.0-cp311-cp311-manylinux_2_28_x86_64.whl")

#: A torch package that does, at import, what torch/__init__.py does with the CUDA wheels
#: (_preload_cuda_lib: the first nvidia/cu13/lib match on sys.path, in order), or loads the
#: runtime by its soname as a NEEDED entry would (LOAD_BY_SONAME), then reports CUDA 13.0.
FAKE_TORCH = """
import ctypes, glob, os, sys
__version__ = "2.13.0"
LOAD_BY_SONAME = {by_soname!r}
def _preload():
    if LOAD_BY_SONAME:
        return ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    for entry in sys.path:
        found = sorted(glob.glob(os.path.join(entry or ".", "nvidia", "cu13", "lib", "libcudart.so.*[0-9]")))
        if found:
            return ctypes.CDLL(found[0], mode=ctypes.RTLD_GLOBAL)
    raise OSError("libcudart.so.13: cannot open shared object file: No such file or directory")
_preload()
from torch import version, cuda, backends, _C
"""


def fake_torch(site: Path, *, by_soname: bool = False) -> None:
    package = site / "torch"
    (package / "version").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(textwrap.dedent(FAKE_TORCH.format(by_soname=by_soname)))
    (package / "version" / "__init__.py").write_text("cuda = '13.0'\nhip = None\n")
    (package / "cuda.py").write_text("def is_available():\n    return False\ndef get_arch_list():\n    return []\n")
    (package / "backends.py").write_text("class cudnn:\n    @staticmethod\n    def version():\n        return None\n")
    (package / "_C.py").write_text("def _cuda_getArchFlags():\n    return 'sm_75 sm_80 sm_90'\n")


@pytest.fixture
def cuda13_site(registry: Any, tmp_path: Path) -> Path:
    """An environment's site-packages: torch 2.13.0's real metadata (with the stand-in loader),
    the real cuda-toolkit 13.0.3 metadata wheel and the nvidia-cuda-runtime 13.0.96 it pins."""
    site = tmp_path / "site-packages"
    metadata_only(registry.wheel_metadata(*TORCH_213), site, "torch", "2.13.0")
    fake_torch(site)
    unpack(registry.wheel("cuda-toolkit==13.0.3.0"), site)
    unpack(registry.wheel("nvidia-cuda-runtime==13.0.96"), site)
    return site


def wheel_record(registry: Any, name: str, version: str) -> tuple[Path, Path]:
    """The real METADATA and RECORD of one Linux x86_64 wheel on PyPI, read by HTTP ranges (the
    wheels are hundreds of MB) and cached next to the registry's other metadata."""
    import json

    from tests.artefacts import SIMPLE, _get, _zip_member

    cached = registry.metadata / f"{name}-{version}.RECORD"
    try:
        index = json.loads(_get(SIMPLE.format(name=name), "application/vnd.pypi.simple.v1+json"))
        [entry] = [f for f in index["files"] if f"-{version}-" in f["filename"] and "x86_64" in f["filename"]][:1]
        if not cached.is_file():
            data = _zip_member(entry["url"], int(entry["size"]), ".dist-info/RECORD")
            registry.metadata.mkdir(parents=True, exist_ok=True)
            cached.with_suffix(".tmp").write_bytes(data)
            cached.with_suffix(".tmp").replace(cached)
    except (OSError, ValueError, KeyError) as exc:
        pytest.skip(f"cannot read the RECORD of {name} {version} from PyPI (offline?): {exc}")
    return registry.wheel_metadata(name, entry["filename"]), cached


def record_only(site: Path, metadata: Path, record: Path, name: str, version: str) -> None:
    """A distribution installed as its real RECORD says, its shared objects small stand-ins
    (what the probe reads of them is the RECORD and the paths)."""
    folder = metadata_only(metadata, site, name, version)
    (folder / "RECORD").write_bytes(record.read_bytes())
    for line in record.read_text().splitlines():
        path = line.split(",", 1)[0]
        if ".so" in path:
            (site / path).parent.mkdir(parents=True, exist_ok=True)
            (site / path).write_text(f"stand-in for {name} {version}\n")

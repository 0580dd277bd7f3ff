"""Distributions as the interpreter resolves them, read from real wheels' metadata folders."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.base.childside.packages import (
    build_files,
    installed,
    metadata_field,
    normalize,
    owners,
    record_files,
    requirement_name,
)
from tests.artefacts import install_target, metadata_only

NEW = "nvidia-cuda-runtime==13.0.96"
OLD = "nvidia-cuda-runtime==13.0.48"
TORCH_213 = ("torch", "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl")


@pytest.fixture(scope="module")
def shadowed(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """site: the environment (13.0.96 unpacked); target: `pip install --target` of 13.0.48."""
    from tests.artefacts import unpack

    site = unpack(registry.wheel(NEW), tmp_path_factory.mktemp("site"))
    target = install_target(registry.wheel(OLD), tmp_path_factory.mktemp("target"))
    return site, target


def test_the_first_copy_on_the_path_is_the_one_resolved(shadowed: tuple[Path, Path], tmp_path: Path) -> None:
    site, target = shadowed
    paths = [str(target), str(tmp_path / "missing"), str(tmp_path / "lib.zip"), str(site)]
    found = installed(paths, lambda name: name.startswith("nvidia-"))
    copies = found["nvidia-cuda-runtime"]
    assert [(c.version, c.location) for c in copies] == [("13.0.48", str(target)), ("13.0.96", str(site))]
    assert copies[0].metadata.endswith("nvidia_cuda_runtime-13.0.48.dist-info")
    assert installed([str(site)], lambda name: name == "torch") == {}


def test_owners_follow_each_copys_record(shadowed: tuple[Path, Path]) -> None:
    site, target = shadowed
    found = installed([str(target), str(site)], lambda name: True)
    candidates = [c for copies in found.values() for c in copies]
    new = os.path.realpath(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    old = os.path.realpath(target / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    owned = owners(candidates, [new, old, "/usr/lib/libnothing.so"])
    assert owned[new].version == "13.0.96" and owned[old].version == "13.0.48"
    assert "/usr/lib/libnothing.so" not in owned
    assert "nvidia/cu13/lib/libcudart.so.13" in record_files(found["nvidia-cuda-runtime"][0])


def test_requires_dist_of_real_torch_metadata(registry: Any, tmp_path: Path) -> None:
    folder = metadata_only(registry.wheel_metadata(*TORCH_213), tmp_path, "torch", "2.13.0")
    requires = metadata_field(str(folder), "Requires-Dist")
    toolkit = [r for r in requires if requirement_name(r) == "cuda-toolkit"]
    extras = "cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx"
    assert toolkit == [f'cuda-toolkit[{extras}]==13.0.3; platform_system == "Linux"']
    assert 'nvidia-nccl-cu13==2.29.7; platform_system == "Linux"' in requires
    assert metadata_field(str(folder), "Name") == ["torch"]


def test_folded_header_lines_and_the_body_are_told_apart(tmp_path: Path) -> None:
    folder = tmp_path / "demo-1.0.dist-info"
    folder.mkdir()
    headers = "Metadata-Version: 2.1\nName: demo\nRequires-Dist: torch\n  >=2.0\nRequires-Dist: numpy\n"
    (folder / "METADATA").write_text(headers + "\nRequires-Dist: body text\n")
    assert metadata_field(str(folder), "requires-dist") == ["torch >=2.0", "numpy"]


def test_build_files_of_a_real_companion(unpacked: Callable[[str], Path]) -> None:
    site = unpacked("torchaudio==2.11.0")
    dist = installed([str(site)], lambda name: name == "torchaudio")["torchaudio"][0]
    files = build_files(dist, "torchaudio")
    assert "__version__ = '2.11.0+cu130'" in files["version.py"]
    assert "cpp_lib.json" not in files and "direct_url.json" not in files


@pytest.mark.parametrize(
    ("line", "name"),
    [("torch==2.11.0", "torch"), ("nvidia_nccl_cu13 ==2.28.9; extra == 'x'", "nvidia-nccl-cu13"), ("  ", None)],
)
def test_requirement_names_are_normalized(line: str, name: str | None) -> None:
    assert requirement_name(line) == name
    assert normalize("Flash_Attn") == "flash-attn"

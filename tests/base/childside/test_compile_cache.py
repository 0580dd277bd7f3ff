"""The smoke run's compile cache: one folder per toolchain, reused while the toolchain stays, a new
one when a compiler, Python's headers or the lookup variables change, never a folder others can write."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from cuda_doctor.base.childside.compile_cache import COMPILE_CACHE_KEEP, compile_cache_folder, toolchain_identity

VERSIONS = {"torch": "2.9.1+cu128", "triton": "3.5.1"}


def tool(folder: Path, name: str, text: str = "#!/bin/sh\necho 1\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def identity(path: Path, **extra: str) -> dict[str, object]:
    return toolchain_identity({"PATH": str(path), **extra}, sys.executable, VERSIONS)


def test_the_same_toolchain_reuses_its_folder(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "gcc")
    first, reused_first = compile_cache_folder(str(tmp_path / "cache"), identity(bin_dir))
    second, reused_second = compile_cache_folder(str(tmp_path / "cache"), identity(bin_dir))
    assert (first, reused_first) == (second, False)
    assert reused_second is True
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o700


@pytest.mark.parametrize("change", ["compiler removed", "compiler replaced", "CC set", "libcuda path set", "torch"])
def test_a_changed_toolchain_compiles_afresh(tmp_path: Path, change: str) -> None:
    bin_dir = tmp_path / "bin"
    gcc = tool(bin_dir, "gcc")
    root = str(tmp_path / "cache")
    before, _ = compile_cache_folder(root, identity(bin_dir))
    extra: dict[str, str] = {}
    versions = dict(VERSIONS)
    if change == "compiler removed":
        gcc.unlink()
    elif change == "compiler replaced":
        tool(bin_dir, "gcc", "#!/bin/sh\necho a longer script\n")
    elif change == "CC set":
        extra["CC"] = str(tool(tmp_path / "other", "cc"))
    elif change == "libcuda path set":
        extra["TRITON_LIBCUDA_PATH"] = str(tmp_path)
    else:
        versions["torch"] = "2.10.0+cu130"
    changed = toolchain_identity({"PATH": str(bin_dir), **extra}, sys.executable, versions)
    after, reused = compile_cache_folder(root, changed)
    assert after != before
    assert reused is False


def test_only_the_newest_toolchain_folders_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    made = []
    for number in range(COMPILE_CACHE_KEEP + 2):
        folder, _ = compile_cache_folder(str(root), identity(tmp_path, CC=f"cc-{number}"))
        os.utime(folder, (1_000_000 + number, 1_000_000 + number))
        made.append(folder)
    left = sorted(str(p) for p in root.iterdir())
    assert left == sorted(made[-COMPILE_CACHE_KEEP:])


def test_a_cache_others_can_write_to_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    root.chmod(0o777)
    with pytest.raises(OSError, match="only this user can write"):
        compile_cache_folder(str(root), identity(tmp_path))


def test_a_planted_link_for_the_toolchain_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    folder, _ = compile_cache_folder(str(root), identity(tmp_path))
    os.rmdir(folder)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, folder)
    with pytest.raises(OSError, match="only this user can write"):
        compile_cache_folder(str(root), identity(tmp_path))

"""Where the smoke run's compile level compiles: its toolchain folder in cuda-doctor's cache, else a
temporary folder; never the user's Triton or Inductor cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cuda_doctor.framework.compile import smoke_child
from cuda_doctor.framework.compile.probe import compile_cache_root


def test_the_toolchain_folder_is_kept_and_reused(tmp_path: Path) -> None:
    config = {"compile_cache": str(tmp_path / "compile")}
    first: dict[str, object] = {}
    folder, temporary = smoke_child.compile_folder(config, first, "2.9.1")
    second: dict[str, object] = {}
    again, temporary_again = smoke_child.compile_folder(config, second, "2.9.1")
    assert folder == again and folder is not None and folder.startswith(str(tmp_path / "compile"))
    assert (temporary, temporary_again) == (False, False)
    assert (first["compile_cache"], second["compile_cache"]) == ("new", "reused")


def test_a_refused_cache_falls_back_to_a_temporary_folder(tmp_path: Path) -> None:
    root = tmp_path / "compile"
    root.mkdir()
    root.chmod(0o777)
    result: dict[str, object] = {}
    folder, temporary = smoke_child.compile_folder({"compile_cache": str(root)}, result, "2.9.1")
    assert folder is not None and temporary is True
    try:
        assert not folder.startswith(str(root))
        assert result["compile_cache"] == "temporary"
        assert "only this user can write" in str(result["compile_cache_error"])
    finally:
        shutil.rmtree(folder)


def test_the_cache_root_follows_the_probed_environment(tmp_path: Path) -> None:
    assert compile_cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == os.path.join(tmp_path, "cuda-doctor", "compile")
    assert compile_cache_root({"HOME": "/home/u"}) == "/home/u/.cache/cuda-doctor/compile"
    assert compile_cache_root({}) is None

"""The site-packages scan over real wheels: what it finds, the per-file cache, the time budget."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.framework.fatbin.cache import SCHEMA, ScanCache
from cuda_doctor.framework.fatbin.scan import scan
from tests.artefacts import unpack

WHEELS = ("torchaudio==2.11.0", "xformers==0.0.35", "nvidia-cufile==1.15.1.6", "nvidia-cuda-runtime==13.0.96")


@pytest.fixture(scope="module")
def pristine(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pristine") / "site-packages"
    for spec in WHEELS:
        unpack(registry.wheel(spec), folder)
    return folder


@pytest.fixture
def site(pristine: Path, tmp_path: Path) -> Path:
    """One site-packages folder with four real wheels installed in it (a copy per test)."""
    return Path(shutil.copytree(pristine, tmp_path / "site-packages"))


def _by_name(result: Any) -> dict[str, dict[str, Any]]:
    return {os.path.basename(item["path"]): item for item in result.files}


def test_cold_then_warm(site: Path, tmp_path: Path) -> None:
    cache_path = tmp_path / "cache" / "fatbin.json"
    first = ScanCache.load(cache_path)
    cold = scan([str(site)], first, budget=60)
    first.save()
    found = _by_name(cold)
    assert cold.complete and cold.reason is None
    assert cold.read == cold.scanned >= 6
    assert found["libcufile.so.0"]["sass"] == [75, 80, 86] and found["libcufile.so.0"]["ptx"] == [[86, "7.1"]]
    assert found["libcufile.so.0"]["owner"] == ["nvidia-cufile", "1.15.1.6"]
    assert found["_C.so"]["sass_specific"] == [90] and found["_C.so"]["cudart"] == 12
    assert found["_C.so"]["owner"] == ["xformers", "0.0.35"] and found["_C.so"]["c10_cuda"] is True
    assert (
        found["_torchaudio.abi3.so"]["sass"] == [] and found["_torchaudio.abi3.so"]["cudart"] == 13
    )  # linked, no code
    assert "libcudart.so.13" not in found  # no device code and no CUDA runtime to link
    cache = ScanCache.load(cache_path)
    assert cache.error is None and len(cache.entries) == cold.scanned
    warm = scan([str(site)], cache, budget=60)
    assert warm.read == 0 and warm.files == cold.files


def test_a_root_inside_another_is_walked_as_itself(site: Path, tmp_path: Path) -> None:
    outer = site.parent  # holds site-packages below a hidden folder, as a project holds its .venv
    hidden = outer / ".venv" / "lib" / "site-packages"
    hidden.parent.mkdir(parents=True)
    site.rename(hidden)
    result = scan([str(outer), str(hidden)], ScanCache(tmp_path / "c.json"), budget=60)
    assert "libcufile.so.0" in _by_name(result)  # the hidden inner root is scanned on its own
    alone = scan([str(hidden)], ScanCache(tmp_path / "alone.json"), budget=60)
    assert result.scanned == alone.scanned  # each file once, however the roots nest


def test_a_changed_file_is_read_again(site: Path, tmp_path: Path) -> None:
    cache = ScanCache(tmp_path / "fatbin.json")
    scan([str(site)], cache, budget=60)
    library = site / "nvidia" / "cu13" / "lib" / "libcufile.so.0"
    os.utime(library, ns=(1, 1))
    again = scan([str(site)], cache, budget=60)
    assert again.read == 1


def test_links_and_deep_or_hidden_folders(site: Path, tmp_path: Path) -> None:
    library = site / "nvidia" / "cu13" / "lib" / "libcufile.so.0"
    os.link(library, site / "libcufile-hardlink.so")  # the same file twice: read once
    (site / "libcufile-symlink.so").symlink_to(library)  # a symbolic link: skipped, its file is read where it lies
    hidden = site / ".hidden"
    hidden.mkdir()
    os.link(library, hidden / "libhidden.so")
    result = scan([str(site)], ScanCache(tmp_path / "c.json"), budget=60)
    names = [os.path.basename(item["path"]) for item in result.files]
    assert names.count("libcufile.so.0") + names.count("libcufile-hardlink.so") == 1
    assert "libcufile-symlink.so" not in names and "libhidden.so" not in names


def test_the_budget_makes_it_incomplete_and_it_goes_on_next_time(site: Path, tmp_path: Path) -> None:
    cache = ScanCache(tmp_path / "fatbin.json")
    cut = scan([str(site)], cache, budget=0)
    assert not cut.complete and "budget" in str(cut.reason)
    assert not any(entry.get("timed_out") for entry in cache.entries.values())
    done = scan([str(site)], cache, budget=60)
    assert done.complete


def test_a_broken_cache_only_costs_time(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "fatbin.json"
    path.write_text("{not json")
    cache = ScanCache.load(path)
    assert cache.error is not None and "not valid JSON" in cache.error
    result = scan([str(site)], cache, budget=60)
    cache.save()
    assert result.complete and json.loads(path.read_text())["schema"] == SCHEMA
    path.write_text(json.dumps({"schema": 0, "files": {}}))  # an older layout: started afresh
    assert ScanCache.load(path).entries == {} and ScanCache.load(path).error is None


def test_files_that_are_not_elf_are_problems_not_crashes(site: Path, tmp_path: Path) -> None:
    (site / "libscript.so").write_text("INPUT(-lfoo)\n")
    result = scan([str(site)], ScanCache(tmp_path / "c.json"), budget=60)
    assert result.complete
    assert any("libscript.so: ValueError: not an ELF file" in problem for problem in result.problems)


def test_a_cache_nested_past_the_parser_or_not_a_file_only_costs_time(tmp_path: Path) -> None:
    path = tmp_path / "fatbin.json"
    path.write_text("[" * 200_000)
    cache = ScanCache.load(path)
    assert cache.entries == {} and cache.error is not None and "not valid JSON" in cache.error
    path.unlink()
    os.mkfifo(path)  # opened without waiting for a writer, and refused
    cache = ScanCache.load(path)
    assert cache.entries == {} and cache.error is not None and "FIFO" in cache.error

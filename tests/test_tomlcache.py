"""The on-disk cache of parsed TOML files."""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_doctor import tomlcache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache folder, and a process that has not read the cache yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tomlcache, "_memory", None)
    monkeypatch.setattr(tomlcache, "_dirty", False)
    monkeypatch.setattr(tomlcache, "errors", [])
    yield tomlcache.cache_file()


def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tomlcache, "_memory", None)


def test_a_parsed_file_is_served_from_the_cache_next_time(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "rule.toml"
    source.write_text('id = "CD999"\n', encoding="utf-8")
    assert tomlcache.load(source) == {"id": "CD999"}
    tomlcache.flush()
    assert cache.is_file()
    entries = marshal.loads(cache.read_bytes())
    assert entries[os.path.abspath(source)]["data"] == {"id": "CD999"}
    # a new process reads the cached copy, not the file: prove it by editing the cached copy
    entries[os.path.abspath(source)]["data"] = {"id": "from the cache"}
    cache.write_bytes(marshal.dumps(entries))
    new_process(monkeypatch)
    assert tomlcache.load(source) == {"id": "from the cache"}


def test_a_changed_file_is_parsed_again(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "table.toml"
    source.write_text("n = 1\n", encoding="utf-8")
    assert tomlcache.load(source) == {"n": 1}
    tomlcache.flush()
    new_process(monkeypatch)
    source.write_text("n = 22\n", encoding="utf-8")  # another size, another time
    assert tomlcache.load(source) == {"n": 22}


def test_files_that_are_gone_leave_the_cache(cache: Path, tmp_path: Path) -> None:
    kept, gone = tmp_path / "kept.toml", tmp_path / "gone.toml"
    kept.write_text("a = 1\n", encoding="utf-8")
    gone.write_text("b = 2\n", encoding="utf-8")
    tomlcache.load(kept)
    tomlcache.load(gone)
    tomlcache.flush()
    gone.unlink()
    third = tmp_path / "third.toml"
    third.write_text("c = 3\n", encoding="utf-8")
    tomlcache.load(third)  # something new to write
    tomlcache.flush()
    assert set(marshal.loads(cache.read_bytes())) == {os.path.abspath(kept), os.path.abspath(third)}


def test_an_unreadable_cache_only_costs_speed(cache: Path, tmp_path: Path) -> None:
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"not marshal data")
    source = tmp_path / "x.toml"
    source.write_text("x = true\n", encoding="utf-8")
    assert tomlcache.load(source) == {"x": True}
    assert len(tomlcache.errors) == 1 and str(cache) in tomlcache.errors[0]
    tomlcache.flush()  # replaced by a good one
    assert marshal.loads(cache.read_bytes())[os.path.abspath(source)]["data"] == {"x": True}


def test_an_unwritable_cache_is_reported_not_raised(cache: Path, tmp_path: Path) -> None:
    cache.parent.parent.mkdir(parents=True)
    cache.parent.write_text("a file where the cache folder should be", encoding="utf-8")
    source = tmp_path / "y.toml"
    source.write_text("y = 1\n", encoding="utf-8")
    assert tomlcache.load(source) == {"y": 1}
    tomlcache.flush()
    assert any("cannot write" in error for error in tomlcache.errors)


def test_dates_are_not_cached_but_still_returned(cache: Path, tmp_path: Path) -> None:
    source = tmp_path / "dated.toml"
    source.write_text("released = 2024-03-05\n", encoding="utf-8")
    assert str(tomlcache.load(source)["released"]) == "2024-03-05"
    tomlcache.flush()
    assert not cache.exists()  # nothing cacheable was parsed

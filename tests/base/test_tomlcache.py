"""The on-disk cache of parsed TOML files."""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_doctor.base import tomlcache


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


def test_an_edit_of_the_same_size_with_the_time_restored_is_parsed_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "pyproject.toml"
    source.write_text('select = ["CD101"]\n', encoding="utf-8")
    before = source.stat()
    assert tomlcache.load(source) == {"select": ["CD101"]}
    tomlcache.flush()
    new_process(monkeypatch)
    source.write_text('select = ["CD102"]\n', encoding="utf-8")  # same size
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))  # what cp -p, rsync -a, tar do
    assert source.stat().st_size == before.st_size and source.stat().st_mtime_ns == before.st_mtime_ns
    assert tomlcache.load(source) == {"select": ["CD102"]}


def test_a_file_replaced_by_a_copy_with_the_same_stamp_is_parsed_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, other = tmp_path / "rule.toml", tmp_path / "other.toml"
    source.write_text("n = 1\n", encoding="utf-8")
    other.write_text("n = 2\n", encoding="utf-8")
    stamp = source.stat()
    os.utime(other, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert tomlcache.load(source) == {"n": 1}
    tomlcache.flush()
    new_process(monkeypatch)
    os.replace(other, source)  # another inode with the same size and time (rsync -a's rename)
    assert tomlcache.load(source) == {"n": 2}


def test_large_files_are_parsed_every_time_and_never_cached(cache: Path, tmp_path: Path) -> None:
    small, large = tmp_path / "small.toml", tmp_path / "large.toml"
    small.write_text("a = 1\n", encoding="utf-8")
    large.write_text(f'blob = "{"x" * (tomlcache.MAX_CACHED_FILE_BYTES + 1)}"\n', encoding="utf-8")
    assert tomlcache.load(small) == {"a": 1}
    assert len(tomlcache.load(large)["blob"]) == tomlcache.MAX_CACHED_FILE_BYTES + 1
    tomlcache.flush()
    assert set(marshal.loads(cache.read_bytes())) == {os.path.abspath(small)}
    assert cache.stat().st_size < 1024


def test_past_its_cap_the_cache_keeps_what_this_run_used(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tomlcache, "MAX_CACHE_BYTES", 4096)
    monkeypatch.setattr(tomlcache, "_used", set())
    earlier = []
    for index in range(8):  # other projects' files, cached by earlier runs
        path = tmp_path / f"project{index}.toml"
        path.write_text(f'name = "{"p" * 600}{index}"\n', encoding="utf-8")
        earlier.append(path)
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"")  # an empty cache: read as unreadable, replaced below
    for path in earlier[:5]:
        tomlcache.load(path)
    tomlcache.flush()
    new_process(monkeypatch)
    monkeypatch.setattr(tomlcache, "_used", set())
    for path in earlier[5:]:
        tomlcache.load(path)
    tomlcache.flush()
    assert cache.stat().st_size <= 4096
    assert set(marshal.loads(cache.read_bytes())) == {os.path.abspath(p) for p in earlier[5:]}


def test_a_cache_file_over_the_cap_is_not_read(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tomlcache, "MAX_CACHE_BYTES", 1024)
    source = tmp_path / "x.toml"
    source.write_text("x = 1\n", encoding="utf-8")
    cache.parent.mkdir(parents=True)
    cache.write_bytes(marshal.dumps({"padding": "p" * 2000}))
    assert tomlcache.load(source) == {"x": 1}
    assert len(tomlcache.errors) == 1 and "larger than" in tomlcache.errors[0]


@pytest.mark.parametrize("kind", ["device", "huge"])  # a FIFO: tests/commands/test_bounded_reads.py
def test_what_is_not_a_toml_file_is_refused_before_it_is_read(cache: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "pyproject.toml"
    if kind == "huge":
        with path.open("wb") as handle:
            handle.truncate(tomlcache.MAX_FILE_BYTES + 1)
    else:
        path = Path("/dev/zero")  # reading it would never end
    with pytest.raises(OSError) as info:
        tomlcache.load(path)
    expected = {"device": "not a regular file (a character device)", "huge": "larger than 4 MiB"}
    assert expected[kind] in str(info.value.strerror)


def test_files_parsed_on_another_thread_while_the_cache_is_written_are_neither_lost_nor_a_crash(
    cache: Path, tmp_path: Path
) -> None:
    # check loads the rules on one thread while probes and derivers read tables on others; on a
    # first run (nothing cached) a flush could iterate the entries while another thread added one
    import threading

    sources = []
    for n in range(300):
        source = tmp_path / f"table{n}.toml"
        source.write_text(f"n = {n}\n", encoding="utf-8")
        sources.append(source)
    failures: list[BaseException] = []

    def read_all() -> None:
        try:
            for source in sources:
                tomlcache.load(source)
        except BaseException as exc:  # handed to the test's thread, which fails with it
            failures.append(exc)

    reader = threading.Thread(target=read_all)
    reader.start()
    while reader.is_alive():
        tomlcache.flush()
    reader.join()
    tomlcache.flush()
    assert failures == []
    entries = marshal.loads(cache.read_bytes())
    assert all(entries[os.path.abspath(s)]["data"] == {"n": n} for n, s in enumerate(sources))


def test_each_installed_copy_has_a_cache_file_of_its_own(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every copy (a project's venv, a checkout) has its own rule files: one shared cache file held
    them all and was read whole on every start."""
    names = {}
    for copy in ("/venvs/a/site-packages/cuda_doctor", "/venvs/b/site-packages/cuda_doctor"):
        monkeypatch.setattr(tomlcache, "__file__", f"{copy}/tomlcache.py")
        names[copy] = tomlcache.cache_file()
        assert tomlcache.cache_file() == names[copy]  # the same copy, the same file
    first, second = names.values()
    assert first != second and first.parent == second.parent == cache.parent


@pytest.mark.usefixtures("no_home_folder")
def test_no_folder_for_the_cache_only_costs_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tomlcache, "_memory", None)
    monkeypatch.setattr(tomlcache, "_dirty", False)
    monkeypatch.setattr(tomlcache, "errors", [])
    source = tmp_path / "z.toml"
    source.write_text("z = 2\n", encoding="utf-8")
    assert tomlcache.load(source) == {"z": 2}
    tomlcache.flush()
    assert any("no folder to keep a cache in" in error for error in tomlcache.errors)

"""The fatbin scan cache: kept between runs, and only a speed-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.framework.fatbin.cache import ScanCache


@pytest.mark.usefixtures("no_home_folder")
def test_without_a_cache_folder_the_scan_keeps_nothing_and_says_why() -> None:
    cache = ScanCache.load()
    assert cache.path is None and cache.error is not None and "no folder to keep a cache in" in cache.error
    cache.put("/lib/libx.so", {"stamp": [1, 2, 3]})
    cache.save()  # nothing to write to, and no error raised
    assert cache.get("/lib/libx.so", [1, 2, 3]) == {"stamp": [1, 2, 3]}


def test_an_entry_of_another_shape_is_a_miss(tmp_path: Path) -> None:
    from cuda_doctor.framework.fatbin.cache import ScanCache

    good = {"stamp": [1, 2, 3], "sass": [90], "sass_specific": [], "ptx": [[90, "8.4"]], "cudart": 12, "complete": True}
    cache = ScanCache(
        tmp_path / "c.json", {"/a.so": good, "/b.so": {**good, "sass": "90"}, "/c.so": {**good, "ptx": [[90]]}}
    )
    assert cache.get("/a.so", [1, 2, 3]) == good
    assert cache.get("/b.so", [1, 2, 3]) is None and cache.get("/c.so", [1, 2, 3]) is None

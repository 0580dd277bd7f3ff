"""The fatbin scan cache: kept between runs, and only a speed-up."""

from __future__ import annotations

import pytest

from cuda_doctor.framework.fatbin.cache import ScanCache


@pytest.mark.usefixtures("no_home_folder")
def test_without_a_cache_folder_the_scan_keeps_nothing_and_says_why() -> None:
    cache = ScanCache.load()
    assert cache.path is None and cache.error is not None and "no folder to keep a cache in" in cache.error
    cache.put("/lib/libx.so", {"stamp": [1, 2, 3]})
    cache.save()  # nothing to write to, and no error raised
    assert cache.get("/lib/libx.so", [1, 2, 3]) == {"stamp": [1, 2, 3]}

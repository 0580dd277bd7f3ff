"""Where the shipped rules are, and the folder for what cuda-doctor keeps between runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.base.paths import cache_dir, rules_dir


def test_the_shipped_rules_are_found() -> None:
    assert (rules_dir() / "CD101.toml").is_file()


def test_the_cache_folder_follows_xdg_cache_home_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "cuda-doctor"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "cuda-doctor"


@pytest.mark.usefixtures("no_home_folder")
def test_without_home_or_user_entry_there_is_no_cache_folder() -> None:
    with pytest.raises(OSError, match=r"no folder to keep a cache in .*set XDG_CACHE_HOME or HOME"):
        cache_dir()

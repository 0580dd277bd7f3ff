"""Files are written whole or not at all, with the mode a plain write would give."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_doctor.base import atomic


def test_replaces_the_file_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old")
    path.chmod(0o640)
    atomic.write_text(path, "new")
    assert path.read_text() == "new" and path.stat().st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["report.json"]


def test_a_new_file_gets_the_umask_mode_not_a_private_one(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic.write_text(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o644


def test_a_missing_folder_raises_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic.write_text(tmp_path / "gone" / "x.txt", "x")
    assert os.listdir(tmp_path) == []

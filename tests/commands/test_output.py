"""Report files are written whole: a temporary file in the same folder, renamed into place."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from cuda_doctor.commands.output import write_file
from cuda_doctor.core.reportfile import ReportFileError


def test_written_whole_in_new_folders_with_the_umask_mode(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.json"
    old = os.umask(0o027)
    try:
        write_file(target, "first\n")
    finally:
        os.umask(old)
    assert target.read_text() == "first\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    write_file(target, "second\n")
    assert target.read_text() == "second\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]  # no temporary left


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "reports" / "node.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_file(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_fifo_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_file(fifo, "through\n")
    reader.join(10)
    assert got == ["through\n"]


def test_a_file_in_the_way_is_named(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    with pytest.raises(ReportFileError) as info:
        write_file(tmp_path / "t.py" / "x.json", "{}")
    assert f"{tmp_path / 't.py'} is not a directory" in str(info.value)

"""Files are read within bounds: regular files only, at most a limit of bytes."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from cuda_doctor.base.reading import FileRefused, read_bytes, read_text


def test_a_small_regular_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_bytes(b"x = 1\n")
    assert read_bytes(path, 100) == b"x = 1\n"


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with big.open("wb") as handle:
        handle.truncate(5 << 20)  # sparse: the size is real, no disk is spent
    with pytest.raises(FileRefused) as info:
        read_bytes(big, 4 << 20, "a TOML file")
    assert info.value.strerror == "larger than 4 MiB (5.0 MiB): not a TOML file"


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: os.mkfifo(p), "a FIFO"),
        (lambda p: socket.socket(socket.AF_UNIX).bind(str(p)), "a socket"),
    ],
    ids=["fifo", "socket"],
)
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, make: object, kind: str) -> None:
    path = tmp_path / "not-a-file"
    make(path)  # type: ignore[operator]
    with pytest.raises(FileRefused) as info:  # a FIFO without a writer: refused, not waited on
        read_bytes(path, 100, "a report file")
    assert info.value.strerror == f"not a regular file ({kind}), not a report file"


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileRefused, match=r"not a regular file \(a character device\)"):
        read_bytes("/dev/zero", 1 << 20)
    with pytest.raises(FileRefused, match="is a directory"):
        read_bytes(tmp_path, 1 << 20)


def test_proc_files_which_say_size_zero_are_read() -> None:
    assert "Max locked memory" in read_text("/proc/self/limits", 1 << 20)


def test_a_missing_file_is_the_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "gone", 100)

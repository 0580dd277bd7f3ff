"""Reading a file within bounds: a regular file of at most a limit of bytes; anything else
(``/dev/zero``, a FIFO, a huge file) is refused before a byte is read."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class FileRefused(OSError):
    """A path that is not a file to read (an OSError); ``strerror`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EINVAL, reason)


def check(mode: int, size: int, limit: int, what: str) -> None:
    """``FileRefused`` unless ``mode`` is a regular file of at most ``limit`` bytes (``what``: "a report file")."""
    if stat.S_ISDIR(mode):
        raise FileRefused(f"is a directory, not {what}")
    if not stat.S_ISREG(mode):
        raise FileRefused(f"not a regular file ({kind(mode)}), not {what}")
    if size > limit:
        raise FileRefused(f"larger than {megabytes(limit)} ({megabytes(size, 1)}): not {what}")


def kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def megabytes(size: int, digits: int = 0) -> str:
    return f"{size / 2**20:.{digits}f} MiB" if digits or size % 2**20 else f"{size >> 20} MiB"


def read_bytes(path: str | Path, limit: int, what: str = "a file") -> bytes:
    """The bytes of ``path``: ``FileRefused``, or the OSError of opening or reading it.  Checked
    before the (non-blocking) open, on what was opened, and on what was read."""
    info = os.stat(path)
    check(info.st_mode, info.st_size, limit, what)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        check(info.st_mode, info.st_size, limit, what)
        data = _read_at_most(fd, limit + 1, info.st_size + 1)
    finally:
        os.close(fd)
    check(stat.S_IFREG, len(data), limit, what)
    return data


def _read_at_most(fd: int, limit: int, expected: int) -> bytes:
    """Up to ``limit`` bytes, to the end of the file; the first read asks for the ``expected`` size."""
    chunks: list[bytes] = []
    left = limit
    want = min(expected, left)
    while left > 0 and (chunk := os.read(fd, min(want, left))):
        chunks.append(chunk)
        left -= len(chunk)
        want = 2**20  # it grew while read (or said 0, as /proc files do): on, in pieces, to the limit
    return b"".join(chunks)


def read_text(path: str | Path, limit: int, what: str = "a text file") -> str:
    """``read_bytes`` as UTF-8, undecodable bytes replaced (for files read only for a value)."""
    return read_bytes(path, limit, what).decode("utf-8", errors="replace")

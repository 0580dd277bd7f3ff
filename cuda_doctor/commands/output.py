"""Writing a command's report to a file, whole (renamed into place), missing folders created.  A symlink
is written through and a FIFO or device written to, as ``protected_symlinks`` and ``protected_fifos``
allow: never one another user planted in a shared, sticky folder such as ``/tmp``."""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import click

from cuda_doctor.base import atomic

#: How long a FIFO may take to get its reader (a process substitution's starts at once).
READER_WAIT = 3.0


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path``; raises ``ReportFileError`` naming the file and the reason."""
    why = try_write(path, text)
    if why is not None:
        from cuda_doctor.core.reportfile import ReportFileError

        raise ReportFileError(path, f"cannot write the report: {why}")


def echo_or_write(text: str, path: Path | None) -> None:
    """The report to ``path`` when one is given, else to stdout."""
    if path is None:
        click.echo(text, nl=False)
    else:
        write_file(path, text)


def planted(path: Path) -> str | None:
    """Why ``path`` must not be followed or opened: a symlink, FIFO or device owned by another
    user (nor by the folder's owner) in a world-writable sticky folder; None when it may be."""
    try:
        info = os.lstat(path)
        folder = os.stat(path.parent)
    except OSError:
        return None
    shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    if not shared or stat.S_ISREG(info.st_mode) or info.st_uid in (os.geteuid(), folder.st_uid):
        return None
    kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "a FIFO or device"
    return f"{path} is {kind} owned by another user (uid {info.st_uid}) in a shared folder: not written through"


def try_write(path: Path, text: str) -> str | None:
    """``write_file`` that returns why it failed (None when written) instead of raising."""
    try:
        refused = planted(path)
        if refused is not None:
            return refused
        if path.exists() and not path.is_file():
            _write_special(path, text)
            return None
        real = Path(os.path.realpath(path))  # through a symlink, as open() would write
        real.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(real, text)
    except OSError as exc:
        blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        return f"{blocked} is not a directory" if blocked else (exc.strerror or str(exc))
    return None


def _write_special(path: Path, text: str) -> None:
    """Write to a FIFO or device (``-o /dev/stdout``); a FIFO nobody reads in time is an error, not a wait."""
    deadline = time.monotonic() + READER_WAIT
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() > deadline:
                raise OSError(exc.errno, "a FIFO that nobody reads") from None
            time.sleep(0.05)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)

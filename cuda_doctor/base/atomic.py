"""Write a file so that readers see the old content or the new, never a part of it: a temporary
file in the same folder, renamed into place, or removed on failure."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Raises OSError (the temporary file removed) when the file cannot be written.  A name or
    value that is not UTF-8 (a lone surrogate from the file system or the environment) is
    written as a visible escape, ``\\udcff``, as JSON writes it."""
    write_bytes(path, text.encode("utf-8", "backslashreplace"))


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """``mode`` None: the replaced file's mode, else what a plain ``open`` would give."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, _mode(path) if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mode(path: Path) -> int:
    """The replaced file's mode, or what a plain ``open`` would give (not mkstemp's private 0600)."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask

"""Parsed TOML files (rules, knowledge tables, pyproject.toml, ``--config``), cached on disk
between runs, and read within bounds.

``tomllib`` is pure Python: parsing every rule file and knowledge table on each start costs
more than the rest of ``cuda-doctor check --fast`` together.  The cache maps each file's path
to its stamp and parsed content; a file whose stamp changed is parsed again, and entries of
files that no longer exist are dropped when the cache is written.  The stamp is what one
``stat`` gives: size, modification time, inode change time (ctime), inode and device.  The
ctime is what makes it safe: the kernel sets it on every write, and no tool can set it back, so
an edit that keeps the size and restores the modification time (``cp -p``, ``rsync -a``,
``tar``) still changes the stamp.  Hashing the content would be as safe and cost a read of
every file on every start; a ``stat`` is what the fast path already pays.

Bounds (docs/limits.md): a TOML file larger than ``MAX_FILE_BYTES``, or one that is not a
regular file (a FIFO, ``/dev/zero``), is refused before it is read; files above
``MAX_CACHED_FILE_BYTES`` are parsed each time, never cached; the cache file is kept under
``MAX_CACHE_BYTES`` (past it, only the entries the current run used are kept) and a larger
one is not read.  A cache that cannot be read or written only costs speed (the reason is kept
in ``errors``).
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
import zlib
from pathlib import Path
from stat import S_ISREG
from typing import Any

from cuda_doctor import __version__
from cuda_doctor.base import reading
from cuda_doctor.base.paths import cache_dir

#: A rule file, knowledge table or configuration larger than this is refused.
MAX_FILE_BYTES = 4 << 20
#: Larger files are parsed on every run instead of being cached (rule files and tables are a
#: few KB; a huge pyproject.toml must not make every later run, in every project, slower).
MAX_CACHED_FILE_BYTES = 256 << 10
#: The cache file's size limit: what one start of cuda-doctor reads and unmarshals.
MAX_CACHE_BYTES = 4 << 20
WHAT = "a TOML file"

#: Why the cache could not be used in this run (it only costs speed; kept for debugging).
errors: list[str] = []

_memory: dict[str, Any] | None = None
_used: set[str] = set()  # the entries this run read or parsed
_dirty = False
#: Rules load on one thread while probes and derivers read their tables on others: the entries
#: are read, added and flushed under this lock (parsing happens outside it).
_lock = threading.Lock()


def cache_file() -> Path:
    """The cache file of this copy of cuda-doctor; OSError where there is no cache folder."""
    # marshal (the format of .pyc files: no import, fastest to load) is specific to the
    # Python version, hence the version in the name
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
    # One file per installed copy of cuda-doctor: every copy (each project's venv, each
    # checkout) has rule files of its own, and one shared file would be read whole on every start.
    install = f"{zlib.crc32(os.path.dirname(__file__).encode()):08x}"
    return cache_dir() / f"toml-{__version__}-{python}-{install}.marshal"


def _entries() -> dict[str, Any]:
    global _memory
    if _memory is None:
        _memory = {}
        path: Path | str = "the TOML cache"
        try:
            path = cache_file()
            with open(path, "rb") as handle:  # our own file: one open, one fstat, one read
                size = os.fstat(handle.fileno()).st_size
                if size > MAX_CACHE_BYTES:
                    errors.append(f"{path} is larger than {MAX_CACHE_BYTES} bytes ({size}): not read")
                    return _memory
                loaded = marshal.loads(handle.read())
            _memory = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError, EOFError, TypeError) as exc:
            if not isinstance(exc, FileNotFoundError):
                errors.append(f"cannot read {path}: {exc}")
    return _memory


def load(path: Path) -> dict[str, Any]:
    """``tomllib.load`` with the on-disk cache and the bounds.  Raises what tomllib and open
    raise, and ``reading.FileRefused`` (an OSError) for what is not a TOML file to read."""
    global _dirty
    info = path.stat()
    if not S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:  # checked inline: the hot path
        reading.check(info.st_mode, info.st_size, MAX_FILE_BYTES, WHAT)
    key = os.path.abspath(path)
    stamp = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]
    with _lock:
        entry = _entries().get(key)
        if isinstance(entry, dict) and entry.get("stamp") == stamp:
            _used.add(key)
            data: dict[str, Any] = entry["data"]
            return data
    from cuda_doctor.base.tomlcompat import tomllib  # parsing is the slow path: import it only then

    raw = reading.read_bytes(path, MAX_FILE_BYTES, WHAT)
    data = tomllib.loads(raw.decode("utf-8"))
    if len(raw) > MAX_CACHED_FILE_BYTES:
        return data
    try:
        marshal.dumps(data)  # TOML dates and times cannot be marshalled: such files are not cached
    except ValueError:
        return data
    with _lock:
        _entries()[key] = {"stamp": stamp, "data": data}
        _used.add(key)
        _dirty = True
    return data


def flush() -> None:
    """Write the cache if anything new was parsed: whole (a temporary file renamed into place)
    and within ``MAX_CACHE_BYTES``."""
    with _lock:
        _flush()


def _flush() -> None:
    global _dirty
    if not _dirty or _memory is None:
        return
    try:
        target = cache_file()
    except OSError as exc:
        errors.append(f"the TOML cache is not written: {exc}")
        return
    # files that are gone (a deleted project, a temporary rules folder) leave the cache
    for key in [key for key in _memory if not os.path.exists(key)]:
        del _memory[key]
    blob = marshal.dumps(_memory)
    if len(blob) > MAX_CACHE_BYTES:  # many projects' files: keep what this run uses
        for key in [key for key in _memory if key not in _used]:
            del _memory[key]
        blob = marshal.dumps(_memory)
    if len(blob) > MAX_CACHE_BYTES:
        errors.append(f"the parsed files of this run take {len(blob)} bytes, over {MAX_CACHE_BYTES}: not cached")
        return
    from cuda_doctor.base import atomic

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(target, blob, mode=0o600)
        _dirty = False
    except OSError as exc:
        errors.append(f"cannot write {target}: {exc}")

"""Parsed TOML files (rules, knowledge tables, pyproject.toml, ``--config``), read within bounds
and cached on disk between runs, keyed by each file's ``stat`` stamp (ctime included: the kernel
sets it on every write).  A cache that cannot be read or written only costs speed."""

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
#: Larger files are parsed on every run instead of being cached.
MAX_CACHED_FILE_BYTES = 256 << 10
#: The cache file's size limit: what one start of cuda-doctor reads and unmarshals.
MAX_CACHE_BYTES = 4 << 20
WHAT = "a TOML file"

#: Why the cache could not be used in this run (it only costs speed; kept for debugging).
errors: list[str] = []

_memory: dict[str, Any] | None = None
_used: set[str] = set()  # the entries this run read or parsed
_dirty = False
#: The entries are read, added and flushed under this lock (parsing happens outside it).
_lock = threading.Lock()


def cache_file() -> Path:
    """The cache file of this copy of cuda-doctor; OSError where there is no cache folder."""
    # marshal's format depends on the Python version; each installed copy has rule files of its own
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
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
        if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("data"), dict):
            _used.add(key)
            data: dict[str, Any] = entry["data"]
            return data
    from cuda_doctor.base.tomlcompat import tomllib  # parsing is the slow path: import it only then

    raw = reading.read_bytes(path, MAX_FILE_BYTES, WHAT)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:  # tables or arrays nested past the parser's depth
        raise ValueError("nested too deeply to read") from None
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
    """Write the cache, atomically and within ``MAX_CACHE_BYTES``, if anything new was parsed."""
    global _dirty, _memory
    with _lock:
        if not _dirty or _memory is None:
            return
        try:
            target = cache_file()
        except OSError as exc:
            errors.append(f"the TOML cache is not written: {exc}")
            return
        # files that are gone (a deleted project, a temporary rules folder) leave the cache
        _memory = {key: entry for key, entry in _memory.items() if os.path.exists(key)}
        blob = marshal.dumps(_memory)
        if len(blob) > MAX_CACHE_BYTES:  # many projects' files: keep what this run uses
            _memory = {key: entry for key, entry in _memory.items() if key in _used}
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

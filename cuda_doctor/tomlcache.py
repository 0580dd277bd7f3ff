"""Parsed TOML files, cached on disk between runs.

``tomllib`` is pure Python: parsing every rule file and knowledge table on each start costs
more than the rest of ``cuda-doctor check --fast`` together.  The cache maps each file's path
to its size, modification time and parsed content; a file whose size or time changed is parsed
again, and entries of files that no longer exist are dropped when the cache is written.  A
cache that cannot be read or written only costs speed (the reason is kept in ``errors``).
"""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path
from typing import Any

from cuda_doctor import __version__

#: Why the cache could not be used in this run (it only costs speed; kept for debugging).
errors: list[str] = []

_memory: dict[str, Any] | None = None
_dirty = False


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    # marshal (the format of .pyc files: no import, fastest to load) is specific to the
    # Python version, hence the version in the name
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return Path(base) / "cuda-doctor" / f"toml-{__version__}-{python}.marshal"


def _entries() -> dict[str, Any]:
    global _memory
    if _memory is None:
        try:
            loaded = marshal.loads(cache_file().read_bytes())
            _memory = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError, EOFError, TypeError) as exc:
            if not isinstance(exc, FileNotFoundError):
                errors.append(f"cannot read {cache_file()}: {exc}")
            _memory = {}
    return _memory


def load(path: Path) -> dict[str, Any]:
    """``tomllib.load`` with the on-disk cache.  Raises what tomllib and open raise."""
    global _dirty
    stat = path.stat()
    key = os.path.abspath(path)
    stamp = [stat.st_size, stat.st_mtime_ns]
    entry = _entries().get(key)
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        data: dict[str, Any] = entry["data"]
        return data
    from cuda_doctor.tomlcompat import tomllib  # parsing is the slow path: import it only then

    with path.open("rb") as handle:
        data = tomllib.load(handle)
    try:
        marshal.dumps(data)  # TOML dates and times cannot be marshalled: such files are not cached
    except ValueError:
        return data
    _entries()[key] = {"stamp": stamp, "data": data}
    _dirty = True
    return data


def flush() -> None:
    """Write the cache if anything new was parsed."""
    global _dirty
    if not _dirty or _memory is None:
        return
    target = cache_file()
    import tempfile

    # files that are gone (a deleted project, a temporary rules folder) leave the cache
    for key in [key for key in _memory if not os.path.exists(key)]:
        del _memory[key]
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".toml-", suffix=".marshal")
        with os.fdopen(fd, "wb") as handle:
            handle.write(marshal.dumps(_memory))
        os.replace(tmp, target)
        _dirty = False
    except OSError as exc:
        errors.append(f"cannot write {target}: {exc}")

"""What the fatbin scan found per file, kept between runs in cuda-doctor's cache folder: an entry
is valid while its file keeps its size, modification time and inode."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_doctor import __version__
from cuda_doctor.base.atomic import write_text
from cuda_doctor.base.paths import cache_dir
from cuda_doctor.base.reading import read_bytes

#: 3: device code of ``.nv_fatbin`` and ``__nv_relfatbin`` (2 read ``.nv_fatbin`` alone).
SCHEMA = 3
#: A cache file larger than this is not read (a fresh scan costs less than trusting it).
CACHE_CAP = 64 << 20
Stamp = list[int]


def stamp_of(stat: os.stat_result) -> Stamp:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


@dataclass
class ScanCache:
    path: Path | None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    dirty: bool = field(default=False, init=False)

    @classmethod
    def load(cls, path: Path | None = None) -> ScanCache:
        try:
            path = path or cache_dir() / f"fatbin-{__version__}.json"
        except OSError as exc:  # no cache folder: the scan reads every file, and keeps nothing
            return cls(None, error=str(exc))
        try:
            data = read_bytes(path, CACHE_CAP, "a fatbin scan cache")  # FileRefused past the cap, or not a file
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            return cls(path, error=f"cannot read {path}: {exc.strerror or exc}")
        try:
            loaded = json.loads(data)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser's depth
            return cls(path, error=f"{path} is not valid JSON ({exc}): read again from the files")
        if not isinstance(loaded, dict) or loaded.get("schema") != SCHEMA or not isinstance(loaded.get("files"), dict):
            return cls(path)  # another layout (an older cuda-doctor): start afresh
        return cls(path, {k: v for k, v in loaded["files"].items() if isinstance(v, dict)})

    def get(self, path: str, stamp: Stamp) -> dict[str, Any] | None:
        """The entry of a file unchanged since it was read; one of another shape (a cache file
        edited or written by hand) is a miss, and the file is read again."""
        entry = self.entries.get(path)
        if entry is None or entry.get("stamp") != stamp or not well_formed(entry):
            return None
        return entry

    def put(self, path: str, entry: dict[str, Any]) -> None:
        self.entries[path] = entry
        self.dirty = True

    def save(self) -> None:
        """Write the cache if anything changed; entries of files that are gone are dropped."""
        if not self.dirty or self.path is None:
            return
        kept = {path: entry for path, entry in self.entries.items() if os.path.exists(path)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text(self.path, json.dumps({"schema": SCHEMA, "files": kept}, separators=(",", ":")))
            self.dirty = False
        except OSError as exc:
            self.error = f"cannot write {self.path}: {exc.strerror or exc}"


#: The type of each field of an entry (``scan.read_file``), as JSON gives it back.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "sass": list, "sass_specific": list, "ptx": list, "cudart": (int, type(None)), "c10_cuda": bool,
    "torch": bool, "complete": bool, "problem": (str, type(None)), "timed_out": bool, "owner": (list, type(None)),
}  # fmt: skip


def well_formed(entry: dict[str, Any]) -> bool:
    if not all(isinstance(entry[key], kind) for key, kind in _FIELDS.items() if key in entry):
        return False
    arches = [*entry.get("sass", []), *entry.get("sass_specific", [])]
    ptx = entry.get("ptx", [])
    pairs = all(
        isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and isinstance(item[1], str)
        for item in ptx
    )
    return pairs and all(isinstance(arch, int) for arch in arches)

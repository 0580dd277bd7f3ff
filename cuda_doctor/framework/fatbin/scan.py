"""Walk site-packages folders and read the device code and CUDA linkage of every shared object, by
its headers only, once per version of the file (``cache.ScanCache``), within a time budget."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cuda_doctor.base.childside.elf import dynamic_names, elf_sections
from cuda_doctor.base.childside.packages import installed, owners
from cuda_doctor.framework.fatbin.cache import ScanCache, Stamp, stamp_of
from cuda_doctor.framework.fatbin.parse import read_device_code

SHARED_OBJECT = re.compile(r"\.so(\.\d+)*$")
#: Folders below a site-packages folder walked at most (nvidia/cu13/lib is 3, jax_plugins/… 2).
MAX_DEPTH = 8
_TORCH_LIBRARIES = re.compile(r"^lib(c10|torch)(_\w+)?\.so$")
#: The CUDA runtime's major version in a needed library's name: libcudart.so.12
_CUDART = re.compile(r"libcudart\.so\.(\d+)(?:\.|\Z)")
MAX_PROBLEMS = 20


@dataclass
class ScanResult:
    files: list[dict[str, Any]]  # the files with device code or CUDA linkage (cache entries + path)
    scanned: int  # shared objects listed
    read: int  # of those, read from the file (not from the cache)
    complete: bool
    reason: str | None
    seconds: float
    problems: list[str] = field(default_factory=list)


def shared_objects(roots: Iterable[str], deadline: float) -> tuple[list[tuple[str, os.stat_result]], bool]:
    """Every shared object below ``roots``, each file once, and whether that finished by ``deadline``."""
    found: list[tuple[str, os.stat_result]] = []
    seen: set[tuple[int, int]] = set()
    roots = list(roots)
    for root in roots:
        others = frozenset(r for r in roots if r != root)  # a root inside another is walked as itself
        for path, stat in _walk(root, 0, others):
            key = (stat.st_dev, stat.st_ino)
            if key not in seen:
                seen.add(key)
                found.append((path, stat))
            if time.monotonic() > deadline:
                return found, False
    return found, True


def _walk(folder: str, depth: int, others: frozenset[str]) -> Iterator[tuple[str, os.stat_result]]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # unreadable or gone: nothing to find there
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                inside = depth < MAX_DEPTH and not entry.name.startswith(".") and entry.name != "__pycache__"
                if inside and entry.path not in others:
                    yield from _walk(entry.path, depth + 1, others)
            elif SHARED_OBJECT.search(entry.name) and entry.is_file(follow_symlinks=False):
                yield os.path.realpath(entry.path), entry.stat(follow_symlinks=False)
        except OSError:
            continue  # vanished while listing


def read_file(path: str, stamp: Stamp, deadline: float | None = None) -> dict[str, Any]:
    """One file's cache entry: its device code and the CUDA and torch libraries it needs."""
    entry: dict[str, Any] = {"stamp": stamp}
    try:
        with open(path, "rb", buffering=0) as handle:  # unbuffered: each header is one small read
            sections = elf_sections(handle)
            code = read_device_code(handle.fileno(), sections, deadline)
            needed = dynamic_names(handle, sections)[1]
    except (OSError, ValueError) as exc:
        entry.update(problem=f"{type(exc).__name__}: {exc}", complete=True)
        return entry
    cudart = (_CUDART.match(name) for name in needed)
    entry.update(
        sass=sorted(code.sass),
        sass_specific=sorted(code.sass_specific),
        ptx=sorted([arch, version] for arch, version in code.ptx),
        cudart=next((int(match.group(1)) for match in cudart if match), None),
        c10_cuda="libc10_cuda.so" in needed,
        torch=any(_TORCH_LIBRARIES.match(name) for name in needed),
        complete=code.complete,
        problem=code.problem,
    )
    if code.timed_out:
        entry["timed_out"] = True
    return entry


def relevant(entry: dict[str, Any]) -> bool:
    """Device code, or linked against the CUDA runtime or torch's CUDA library."""
    code = entry.get("sass") or entry.get("sass_specific") or entry.get("ptx")
    return bool(code or entry.get("cudart") or entry.get("c10_cuda"))


def scan(roots: list[str], cache: ScanCache, budget: float) -> ScanResult:
    start = time.monotonic()
    deadline = start + budget
    listed, complete = shared_objects(roots, deadline)
    reason = None if complete else f"listing the shared objects took more than the {budget:g} s budget"
    found: list[dict[str, Any]] = []
    problems: list[str] = []
    read = 0
    stopped_at = None  # the file the budget ran out at
    for index, (path, stat) in enumerate(listed):
        stamp = stamp_of(stat)
        entry = cache.get(path, stamp)
        if entry is None:
            if time.monotonic() > deadline:
                stopped_at = index
                break
            entry = read_file(path, stamp, deadline)
            read += 1
            if not entry.get("timed_out"):
                cache.put(path, entry)  # a file cut short by the budget is read again next time
        if entry.get("problem") and len(problems) < MAX_PROBLEMS:
            problems.append(f"{path}: {entry['problem']}")
        if relevant(entry):
            found.append({"path": path, **entry})
        if entry.get("timed_out"):
            stopped_at = index
            break
    if stopped_at is not None:
        complete = False
        reason = f"read {stopped_at} of {len(listed)} shared objects within the {budget:g} s budget"
    _own(found, roots, cache)
    return ScanResult(found, len(listed), read, complete, reason, round(time.monotonic() - start, 3), problems)


def _own(files: list[dict[str, Any]], roots: list[str], cache: ScanCache) -> None:
    """The distribution of each file (cached with its entry)."""
    unowned = [item for item in files if "owner" not in item]
    if unowned:
        everything = installed(roots, lambda name: True)
        owned = owners([copy for copies in everything.values() for copy in copies], [f["path"] for f in unowned])
        for item in unowned:
            dist = owned.get(item["path"])
            item["owner"] = [dist.name, dist.version] if dist else None
            cached = cache.get(item["path"], item["stamp"])
            if cached is not None:
                cache.put(item["path"], {**cached, "owner": item["owner"]})

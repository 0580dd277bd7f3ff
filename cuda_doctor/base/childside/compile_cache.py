"""The smoke run's own compile cache: one folder per toolchain, so that a second run reuses what
the first compiled, and a changed toolchain compiles afresh.

Triton's and Inductor's cache keys already hold the kernel's source, the GPU's architecture and
their own versions, but not what a fresh compile needs from the system: the C and C++ compilers,
Python's headers, where ``libcuda`` is looked up, the ``ptxas`` named by the environment and the
driver.  Those make this folder's name, so a compiler that is gone or replaced, a missing
``Python.h`` or another driver gives a folder with nothing in it, and the step compiles (and
fails) as a training run would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sysconfig

#: Toolchain folders kept; older ones are removed when a new one is made.
COMPILE_CACHE_KEEP = 3
#: Environment variables that change where Triton or Inductor look for a tool or a library.
COMPILE_CACHE_VARIABLES = (
    "CC",
    "CXX",
    "PATH",
    "LD_LIBRARY_PATH",
    "LIBRARY_PATH",
    "CPATH",
    "C_INCLUDE_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "TRITON_LIBCUDA_PATH",
    "TRITON_PTXAS_PATH",
    "TRITON_PTXAS_BLACKWELL_PATH",
    "TRITON_CUDACRT_PATH",
    "TRITON_CUDART_PATH",
)
_CACHE_DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"


def _cache_file_identity(path: str | None) -> list[object] | None:
    """A file's resolved path, size and modification time; None when there is no such file."""
    if not path:
        return None
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return None
    return [real, info.st_size, info.st_mtime_ns]


def _cache_tool_identity(name: str, environ: dict[str, str]) -> list[object] | None:
    found = shutil.which(name, path=environ.get("PATH", os.defpath))
    return _cache_file_identity(found)


def toolchain_identity(environ: dict[str, str], executable: str, versions: dict[str, str | None]) -> dict[str, object]:
    """What decides whether a fresh compile works, beyond Triton's and Inductor's own keys."""
    include = sysconfig.get_paths().get("include") or ""
    driver = None
    try:
        with open(_CACHE_DRIVER_VERSION_FILE, encoding="utf-8", errors="replace") as handle:
            driver = handle.read(4096)
    except OSError:
        driver = None
    return {
        "python": _cache_file_identity(executable),
        "python_h": _cache_file_identity(os.path.join(include, "Python.h")),
        "tools": {name: _cache_tool_identity(name, environ) for name in ("gcc", "clang", "cc", "g++", "c++")},
        "named": {name: _cache_file_identity(environ.get(name)) for name in ("CC", "CXX", "TRITON_PTXAS_PATH")},
        "variables": {name: environ.get(name) for name in COMPILE_CACHE_VARIABLES},
        "ld_so_cache": _cache_file_identity("/etc/ld.so.cache"),
        "driver": driver,
        "versions": versions,
    }


def _cache_private_folder(path: str) -> bool:
    """True when ``path`` is a real folder of this user that nobody else may write to."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o022:
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def _cache_prune(root: str, keep: str) -> None:
    """Remove the oldest toolchain folders beyond ``COMPILE_CACHE_KEEP``; one that cannot be removed stays."""
    entries = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name != keep and _cache_private_folder(path):
            try:
                entries.append((os.lstat(path).st_mtime, path))
            except OSError:  # removed meanwhile by another run
                continue
    entries.sort(reverse=True)
    for _mtime, path in entries[COMPILE_CACHE_KEEP - 1 :]:
        shutil.rmtree(path, ignore_errors=True)


def compile_cache_folder(root: str, identity: dict[str, object]) -> tuple[str, bool]:
    """The folder for this toolchain under ``root`` and whether it held a previous run's work.

    OSError when ``root`` or the folder cannot be made, or is not private to this user: compiled
    code is loaded from it, so a folder others can write to is never used.
    """
    text = json.dumps(identity, sort_keys=True, default=str)
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
    os.makedirs(root, mode=0o700, exist_ok=True)
    if not _cache_private_folder(root):
        raise OSError(f"{root} is not a folder of this user that only this user can write to")
    folder = os.path.join(root, key)
    reused = os.path.isdir(folder)
    if not reused:
        os.mkdir(folder, 0o700)
    if not _cache_private_folder(folder):
        raise OSError(f"{folder} is not a folder of this user that only this user can write to")
    os.utime(folder)
    _cache_prune(root, key)
    return folder, reused

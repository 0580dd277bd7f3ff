"""Which CUDA libraries this process has mapped (``/proc/self/maps``: what the loader really
chose), from where, and at which version where the loaded library can say it cheaply."""

from __future__ import annotations

import os
import re
from typing import Any

from cuda_doctor.base.childside.elf import dynamic_names, elf_sections

MAPS_PATH = "/proc/self/maps"
MAPS_CAP = 16 << 20
#: The libraries of a CUDA stack, by their key in facts; longer names first (libcublasLt, libcublas).
CUDA_LIBRARY = re.compile(
    r"^lib(cuda|cudart|cublasLt|cublas|cudnn(?:_[a-z_]+)?|nccl|nvrtc-builtins|nvrtc|nvJitLink|cusparseLt|cusparse"
    r"|cufftw|cufft|curand|cusolverMg|cusolver|cupti|nvshmem_host|cufile)(?:\.alt)?\.so(?:\.[0-9][0-9.]*)?$"
)


def read_maps(path: str = MAPS_PATH) -> str:
    with open(path, "rb") as handle:
        return handle.read(MAPS_CAP).decode("utf-8", "replace")


def mapped_files(maps: str) -> list[str]:
    """The files a maps text names, each once, in order (``address perms offset dev inode path``)."""
    seen: dict[str, None] = {}
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            path = fields[5].strip()
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            seen.setdefault(path, None)
    return list(seen)


def cuda_library_key(path: str) -> str | None:
    match = CUDA_LIBRARY.match(os.path.basename(path))
    return match.group(1) if match else None


def dotted_version(code: int, major_step: int) -> str:
    """major*major_step+minor*100+patch as "major.minor.patch"."""
    major, rest = divmod(code, major_step)
    return f"{major}.{rest // 100}.{rest % 100}"


def decode_cudnn(code: int) -> str:
    """cuDNN's version number: major*10000+minor*100+patch from 9.0 on, major*1000+… before."""
    return dotted_version(code, 10000 if code >= 90000 else 1000)


def decode_nccl(code: int) -> str:
    """NCCL_VERSION_CODE: major*10000+minor*100+patch from 2.9 on, major*1000+… before."""
    return dotted_version(code, 10000 if code >= 10000 else 1000)


def decode_cudart(code: int) -> str:
    """CUDART_VERSION: major*1000+minor*10 (13000 → 13.0)."""
    return f"{code // 1000}.{code % 1000 // 10}"


def own_version(key: str, path: str) -> str | None:
    """The version the loaded library reports about itself, where a query is cheap and safe."""
    if key == "cuda":
        match = re.match(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", os.path.basename(path))
        return match.group(1) if match else None
    if key not in ("cudart", "cudnn", "nccl"):
        return None
    import ctypes

    mode = getattr(os, "RTLD_NOLOAD", 4) | getattr(os, "RTLD_LAZY", 1)
    library = ctypes.CDLL(path, mode=mode)  # only a library mapped already: never loads one
    if key == "cudnn":
        function = library.cudnnGetVersion
        function.argtypes = []
        function.restype = ctypes.c_size_t
        return decode_cudnn(int(function()))
    value = ctypes.c_int(0)
    function = library.cudaRuntimeGetVersion if key == "cudart" else library.ncclGetVersion
    function.argtypes = [ctypes.POINTER(ctypes.c_int)]
    function.restype = ctypes.c_int
    if function(ctypes.byref(value)) != 0:
        return None
    return decode_cudart(value.value) if key == "cudart" else decode_nccl(value.value)


def soname(path: str) -> str | None:
    with open(path, "rb") as handle:
        return dynamic_names(handle, elf_sections(handle))[0]


def loaded_libraries(maps: str) -> list[dict[str, Any]]:
    """One record per mapped CUDA library: key, file, path, soname, version and where the
    version came from; what could not be read is None with the reason under ``problems``."""
    libraries = []
    for path in mapped_files(maps):
        key = cuda_library_key(path)
        if key is None:
            continue
        record: dict[str, Any] = {"library": key, "file": os.path.basename(path), "path": path, "problems": []}
        for field in ("soname", "version"):
            try:
                record[field] = soname(path) if field == "soname" else own_version(key, path)
            except (OSError, ValueError, AttributeError) as exc:  # AttributeError: a symbol it lacks
                record[field] = None
                record["problems"].append(f"{field}: {type(exc).__name__}: {exc}")
        version_from = "file name" if key == "cuda" else "library"
        record["version_source"] = version_from if record["version"] is not None else None
        libraries.append(record)
    return libraries

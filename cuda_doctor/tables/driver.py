"""The CUDA release ↔ driver table (``rules/data/cuda_driver.toml``): which driver each CUDA
release needs, and the newest CUDA a driver runs."""

from __future__ import annotations

import functools

from cuda_doctor.tables import load_table
from cuda_doctor.tables.versions import major_minor, nvidia_version


@functools.cache
def min_driver_for_cuda(cuda: str) -> str | None:
    """Lowest Linux driver for the GA release of CUDA ``major.minor`` (e.g. "13.0" → 580.65.06)."""
    wanted = major_minor(cuda)
    if wanted is None:
        return None
    candidates = [
        row for row in load_table("cuda_driver")["release"] if major_minor(row["cuda"]) == wanted and row.get("linux")
    ]
    if not candidates:
        return None
    ga = min(candidates, key=lambda row: nvidia_version(row["cuda"]) or ())
    return str(ga["linux"])


def cuda_supported_by_driver(driver: str) -> str | None:
    """Newest CUDA ``major.minor`` whose GA floor this Linux driver meets (table-based)."""
    version = nvidia_version(driver)
    if version is None:
        return None
    rows = load_table("cuda_driver")["release"]
    found = [(nvidia_version(row.get("linux")), nvidia_version(row["cuda"])) for row in rows]
    best = max((cuda for floor, cuda in found if floor and cuda and version >= floor), default=None)
    return f"{best[0]}.{best[1] if len(best) > 1 else 0}" if best else None


def mvc_floor(major: int) -> str | None:
    return next((str(row["linux"]) for row in load_table("cuda_driver")["mvc"] if int(row["major"]) == major), None)


def newest_cuda(nvml_answer: object, driver_version: object) -> str | None:
    """The newest CUDA the driver runs: NVML's answer, else the table's for the driver version."""
    if nvml_answer:
        return str(nvml_answer)
    return cuda_supported_by_driver(str(driver_version)) if driver_version else None

"""Where the shipped rules live: inside the wheel, or at the top of a source checkout."""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # cuda_doctor/


@functools.lru_cache(maxsize=1)
def rules_dir() -> Path:
    installed = _PACKAGE / "rules"  # the wheel force-includes the top-level rules/ here
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / "rules"


def cache_dir() -> Path:
    """cuda-doctor's folder for what it keeps between runs (``$XDG_CACHE_HOME/cuda-doctor``);
    OSError when there is none (no XDG_CACHE_HOME, no HOME, no user database entry)."""
    import os

    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError as exc:  # Path.home() with no HOME and no user database entry
            raise OSError(f"no folder to keep a cache in ({exc}; set XDG_CACHE_HOME or HOME)") from None
    return Path(base) / "cuda-doctor"

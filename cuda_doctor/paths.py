"""Where the shipped rules live: inside the wheel, or at the top of a source checkout."""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def rules_dir() -> Path:
    installed = _PACKAGE / "rules"  # the wheel force-includes the top-level rules/ here
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / "rules"


def cache_dir() -> Path:
    """cuda-doctor's folder for what it keeps between runs (``$XDG_CACHE_HOME/cuda-doctor``)."""
    import os

    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cuda-doctor"

"""The knowledge tables (``rules/data/*.toml``): where they are and parsing them, once.

Each row carries its source; the derivers (framework, container, smoke, NCCL) look
things up in them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from cuda_doctor.base import tomlcache
from cuda_doctor.base.paths import rules_dir


@functools.cache
def load_table(name: str) -> dict[str, Any]:
    """Parse ``rules/data/<name>.toml`` (cached)."""
    return tomlcache.load(table_path(name))  # written back once, at the end of derive_all


def table_path(name: str) -> Path:
    return rules_dir() / "data" / f"{name}.toml"

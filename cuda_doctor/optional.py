"""Importing the parts that a build may leave out (a probe, a deriver) by their module name."""

from __future__ import annotations

import importlib
from types import ModuleType


def import_optional(module_name: str) -> ModuleType | None:
    """The module, or None when that very module is absent.  A missing module *inside* it is a
    real bug and is raised, not mistaken for an absent feature."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return None

"""Importing the parts that a build may leave out (a probe, a deriver) by their module name."""

from __future__ import annotations

import importlib
from typing import Any


def optional_attribute(module_name: str, name: str) -> Any:
    """The module's ``name``, or None when that very module is absent.  A missing module *inside*
    it is a real bug and is raised, not mistaken for an absent feature."""
    try:
        return getattr(importlib.import_module(module_name), name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return None

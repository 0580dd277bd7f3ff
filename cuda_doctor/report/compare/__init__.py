"""The comparison report (``diff``, ``fleet``, which has an HTML page too): format name → the
module that renders it.  The options (``color``, ``width``, ``all_nodes``) are the text format's."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_doctor.compare.diff import Diff
    from cuda_doctor.compare.fleet import Fleet

FORMATS = {fmt: f"cuda_doctor.report.compare.{fmt}" for fmt in ("text", "json", "markdown")}
FLEET_FORMATS = {**FORMATS, "html": "cuda_doctor.report.compare.html"}


def render_diff(diff: Diff, fmt: str, **options: Any) -> str:
    return importlib.import_module(FORMATS[fmt]).render_diff(diff, **options)


def render_fleet(fleet: Fleet, fmt: str, **options: Any) -> str:
    return importlib.import_module(FLEET_FORMATS[fmt]).render_fleet(fleet, **options)

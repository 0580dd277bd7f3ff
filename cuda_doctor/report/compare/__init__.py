"""The comparison report (``diff`` and ``fleet``): format name → the module that renders it.

Every format module has ``render_diff(diff, **options)`` and ``render_fleet(fleet, **options)``;
the options are the text format's (``color``, ``width``, and ``all_nodes`` for a fleet), which the
others accept and ignore.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_doctor.compare.diff import Diff
    from cuda_doctor.compare.fleet import Fleet

FORMATS = {
    "text": "cuda_doctor.report.compare.text",
    "json": "cuda_doctor.report.compare.json",
    "markdown": "cuda_doctor.report.compare.markdown",
}


def render_diff(diff: Diff, fmt: str, **options: Any) -> str:
    text: str = importlib.import_module(FORMATS[fmt]).render_diff(diff, **options)
    return text


def render_fleet(fleet: Fleet, fmt: str, **options: Any) -> str:
    text: str = importlib.import_module(FORMATS[fmt]).render_fleet(fleet, **options)
    return text

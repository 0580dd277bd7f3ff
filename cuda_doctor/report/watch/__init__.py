"""The watch report: format name → the module that renders it.  The options are ``host`` (JSON)
and ``color`` (text); the formats that do not use one ignore it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_doctor.watch.samples import Series
    from cuda_doctor.watch.verdict import Analysis

FORMATS = {fmt: f"cuda_doctor.report.watch.{fmt}" for fmt in ("text", "json", "markdown")}


def render(series: Series, analysis: Analysis, fmt: str, **options: Any) -> str:
    return importlib.import_module(FORMATS[fmt]).render(series, analysis, **options)

"""The watch report: format name → the module that renders it.

Every format module has ``render(series, analysis, **options)``; the options are ``host`` (for
JSON) and ``color`` (for text), which the other formats accept and ignore.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_doctor.watch.samples import Series
    from cuda_doctor.watch.verdict import Analysis

FORMATS = {
    "text": "cuda_doctor.report.watch.text",
    "json": "cuda_doctor.report.watch.json",
    "markdown": "cuda_doctor.report.watch.markdown",
}


def render(series: Series, analysis: Analysis, fmt: str, **options: Any) -> str:
    text: str = importlib.import_module(FORMATS[fmt]).render(series, analysis, **options)
    return text

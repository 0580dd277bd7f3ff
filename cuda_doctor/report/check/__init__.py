"""The check report (``check``, ``smoke``, ``exec``): format name → the module that renders it.

A format's module is imported only when that format is asked for, so a plain-text checklist
never imports json (nor rich, unless it goes to a terminal).  Each module's ``render`` takes
the report and ``verbose`` (show passing checks and evidence), ``terminal`` (text gets colour,
JSON is indented; piped JSON is one line, as ``gh`` and ``pip-audit`` print it) and ``fail_on``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_doctor.checkreport import Report

FORMATS = {
    "text": "cuda_doctor.report.check.text",
    "json": "cuda_doctor.report.check.json",
    "markdown": "cuda_doctor.report.check.markdown",
}


def render(report: Report, fmt: str, verbose: bool = False, terminal: bool = False, fail_on: str = "error") -> str:
    from cuda_doctor.results import Severity

    module = importlib.import_module(FORMATS[fmt])
    text: str = module.render(report, verbose=verbose, terminal=terminal, fail_on=Severity(fail_on))
    return text

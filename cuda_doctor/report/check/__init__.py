"""The check report (``check``, ``smoke``, ``exec``): format name → the module that renders it, imported when
asked for (``oneline`` also decides the exit status).  ``terminal``: text gets colour and JSON is indented."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report

FORMATS = {fmt: f"cuda_doctor.report.check.{fmt}" for fmt in ("text", "json", "markdown", "oneline")}
#: node_exporter's textfile collector (docs/prometheus.md): its own module, not only for the check report.
FORMATS["prometheus"] = "cuda_doctor.report.prometheus"


def render(report: Report, fmt: str, verbose: bool = False, terminal: bool = False, fail_on: str = "error") -> str:
    from cuda_doctor.core.results import Severity

    module = importlib.import_module(FORMATS[fmt])
    return module.render(report, verbose=verbose, terminal=terminal, fail_on=Severity(fail_on))

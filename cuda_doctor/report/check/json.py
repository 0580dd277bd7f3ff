"""JSON: the versioned report schema (docs/json-schema.md), always complete."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cuda_doctor.core.results import Severity

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report


def render(report: Report, *, verbose: bool = False, terminal: bool = False, fail_on: Severity = Severity.ERROR) -> str:
    """Everything, whatever ``verbose``; indented for a terminal, one line into a pipe."""
    return render_json(report, fail_on, indent=2 if terminal else None)


def render_json(report: Report, fail_on: Severity = Severity.ERROR, indent: int | None = 2) -> str:
    return json.dumps(report.to_dict(fail_on), indent=indent, default=str) + "\n"

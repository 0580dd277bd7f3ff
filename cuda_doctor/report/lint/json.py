"""JSON lint output (versioned schema, always complete)."""

from __future__ import annotations

import json

from cuda_doctor.core.checkreport import json_header
from cuda_doctor.lint.engine import LintReport


def render(report: LintReport) -> str:
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    document = {
        **json_header("cuda-doctor/lint", 1),
        "files": report.files,
        "findings": [f.to_dict() for f in report.findings],
        "summary": counts,
    }
    return json.dumps(document, indent=2) + "\n"

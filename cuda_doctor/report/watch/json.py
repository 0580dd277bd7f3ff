"""The watch report as JSON: the full recorded series plus the analysis, so it can be re-judged."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from cuda_doctor.core.checkreport import json_header
from cuda_doctor.watch.samples import Series
from cuda_doctor.watch.verdict import Analysis

SCHEMA = "cuda-doctor/watch-report"
SCHEMA_VERSION = 1


def render(series: Series, analysis: Analysis, host: str = "", **_: Any) -> str:
    document = {
        **json_header(SCHEMA, SCHEMA_VERSION),
        "host": host,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "watch",
        "argv": list(series.command),
        "exit_code": series.exit_code,
        "analysis": asdict(analysis),
        "series": series.to_dict(),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"

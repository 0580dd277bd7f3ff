"""JSON for ``diff`` and ``fleet``: complete and stable, for CI and dashboards."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from cuda_doctor.compare.diff import Diff
from cuda_doctor.compare.fleet import Fleet
from cuda_doctor.core.checkreport import json_header
from cuda_doctor.core.reportfile import SavedReport

#: Version of the comparison output below (independent of the report schema it reads).
COMPARE_SCHEMA_VERSION = 1


def _source(report: SavedReport) -> dict[str, Any]:
    return {
        "path": report.path,
        "host": report.host,
        "created": report.created,
        "tool": report.tool_version,
        "schema_version": report.schema_version,
        "notes": list(report.notes),
    }


def render_diff(diff: Diff, **_: Any) -> str:
    document = {
        **json_header("cuda-doctor/diff", COMPARE_SCHEMA_VERSION),
        "before": _source(diff.before),
        "after": _source(diff.after),
        "same_host": diff.same_host,
        "noise": diff.noise,
        "worse": diff.worse,
        "rules_compared": diff.rules_compared,
        "without_results": [r.path for r in diff.without_results],
        "facts": [asdict(f) for f in diff.facts],
        "environment": [asdict(e) for e in diff.environment],
        "not_run": [asdict(g) for g in diff.not_run],
        "gpus_only": [asdict(only) for only in diff.gpus_only],
        "rules": [asdict(r) for r in diff.rules],  # a status is a str: written as its value
        "figures": [asdict(f) for f in diff.figures],
        "checks": [asdict(c) for c in diff.checks],
        "summary": {
            "facts_changed": len(diff.facts),
            "facts_lost": len(diff.lost_facts),
            "facts_downgraded": len(diff.downgrades),
            "environment_changed": len(diff.environment),
            "environment_worse": len(diff.worse_environment),
            "rules_newly_failing": len(diff.newly_failing),
            "rules_fixed": len(diff.fixed),
            "figures_slower": len(diff.slower),
            "figures_faster": len(diff.faster),
            "checks_broken": len(diff.broken_checks),
        },
    }
    return json.dumps(document, indent=2, default=str) + "\n"


def render_fleet(fleet: Fleet, **_: Any) -> str:
    document = {
        **json_header("cuda-doctor/fleet", COMPARE_SCHEMA_VERSION),
        "noise": fleet.noise,
        "uniform": fleet.uniform,
        "majority": asdict(fleet.majority) if fleet.majority else None,
        "majority_count": fleet.majority_count,
        "majority_tied": fleet.majority_tied,
        "tied_with": [asdict(c) for c in fleet.tied_with],
        "repeated": list(fleet.repeated),
        "nodes": [
            {
                "host": n.host,
                "path": n.path,
                "created": n.created,
                "config": dict(vars(n.config)),  # its fields, without asdict's slow deep copy
                "failing": list(n.failing),
                "warnings": n.warnings,
            }
            for n in fleet.nodes
        ],
        "differing": [asdict(d) for d in fleet.differing],
        "outliers": [asdict(o) for o in fleet.outliers],
        "stats": [asdict(s) for s in fleet.stats],
        "duplicates": list(fleet.duplicates),
        "errors": [{"path": e.path, "reason": e.reason} for e in fleet.errors],
        "summary": {
            "nodes": len(fleet.nodes),
            "unreadable": len(fleet.errors),
            "differing": len(fleet.differing),
            "failing": len(fleet.failing),
            "outliers": len(fleet.outliers),
        },
    }
    return json.dumps(document, indent=2, default=str) + "\n"

"""SARIF 2.1.0 lint output (GitHub code scanning and other SARIF viewers)."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

from cuda_doctor import __version__
from cuda_doctor.lint.engine import LintReport

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def artifact(path: str) -> dict[str, str]:
    """A file as SARIF's artifactLocation: a URI reference, percent-encoded (``#``, ``?``, ``%``,
    spaces, newlines, bytes that are not UTF-8), relative to the source root or a ``file:`` URI."""
    encoded = quote(os.fsencode(path), safe="/")
    if path.startswith("/"):
        return {"uri": f"file://{encoded}"}
    return {"uri": encoded, "uriBaseId": "%SRCROOT%"}


def render(report: LintReport) -> str:
    rules = sorted(report.rules.values(), key=lambda r: r.id)
    index = {rule.id: i for i, rule in enumerate(rules)}
    driver: dict[str, Any] = {
        "name": "cuda-doctor",
        "version": __version__,
        "rules": [
            {
                "id": rule.id,
                "name": rule.title,
                "shortDescription": {"text": rule.title},
                "fullDescription": {"text": rule.rationale},
                "help": {"text": f"{rule.rationale}\n\nFix: {rule.fix or ''}"},
                **({"helpUri": rule.links[0]} if rule.links else {}),
                "defaultConfiguration": {"level": LEVEL[rule.severity.value]},
                "properties": {"category": rule.category, "tags": [rule.category]},
            }
            for rule in rules
        ],
    }
    results = []
    for f in report.findings:
        region = {"startLine": f.line, "startColumn": f.column}
        text = f.message if not f.fix else f"{f.message}\nFix: {f.fix}"
        result = {
            "ruleId": f.rule_id,
            "level": LEVEL[f.severity.value],
            "message": {"text": text},
            "locations": [{"physicalLocation": {"artifactLocation": artifact(f.path), "region": region}}],
            "ruleIndex": index[f.rule_id],  # every finding's rule is among the report's rules
        }
        results.append(result)
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "columnKind": "unicodeCodePoints", "results": results}],
    }
    return json.dumps(document, indent=2) + "\n"

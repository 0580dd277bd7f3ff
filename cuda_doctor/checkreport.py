"""What one run found: the facts, the rule results and any internal problems (the report model).

``check``, ``facts``, ``smoke`` and ``exec`` produce one; the reporters render it, and
``to_dict`` is its JSON form, in the schema named here, which ``cuda_doctor.reportfile`` reads
back with its checks.
"""

from __future__ import annotations

import os
import time
from typing import Any

from cuda_doctor.facts import Facts
from cuda_doctor.results import Result, Severity, Status, exit_code

SCHEMA = "cuda-doctor/report"
#: The report schema version this version writes and fully understands.
SCHEMA_VERSION = 1


def hostname() -> str:
    return os.uname().nodename  # the same as socket.gethostname(), without importing socket


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


class Report:
    """What one run found; ``to_dict`` is its JSON form."""

    # a plain class, not a dataclass: making one costs about 1 ms, on every start (docs/architecture.md)
    __slots__ = ("command", "created", "facts", "host", "problems", "results")

    def __init__(
        self,
        facts: Facts,
        results: list[Result],
        command: str = "check",
        host: str | None = None,  # None: this machine
        created: str | None = None,  # None: now
        problems: list[str] | None = None,
    ) -> None:
        self.facts = facts
        self.results = results
        self.command = command
        self.host = hostname() if host is None else host
        self.created = now() if created is None else created
        self.problems: list[str] = [] if problems is None else problems  # internal trouble worth showing (never silent)

    def __repr__(self) -> str:
        shown = f"command={self.command!r}, host={self.host!r}, created={self.created!r}"
        return f"Report({shown}, results={len(self.results)}, problems={self.problems!r})"

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for result in self.results:
            counts[result.status.value] += 1
        return counts

    def exit_code(self, fail_on: Severity) -> int:
        return exit_code(self.results, fail_on)

    def to_dict(self, fail_on: Severity = Severity.ERROR) -> dict[str, Any]:
        from cuda_doctor.report import json_header

        return {
            **json_header(SCHEMA, SCHEMA_VERSION),
            "host": self.host,
            "created": self.created,
            "command": self.command,
            "facts": self.facts.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "problems": list(self.problems),
            "summary": {**self.counts(), "exit_code": self.exit_code(fail_on), "fail_on": fail_on.value},
        }

"""The report model: what one run found; ``to_dict`` is its JSON form, which ``reportfile`` reads back."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import EXIT_NO_VERDICT, Result, Severity, Status, exit_code

SCHEMA = "cuda-doctor/report"
SCHEMA_VERSION = 1  # the version this cuda-doctor writes and fully understands


def json_header(schema: str, version: int) -> dict[str, object]:
    """The fields every JSON document cuda-doctor writes begins with."""
    from cuda_doctor import __version__

    return {"schema": schema, "schema_version": version, "tool": {"name": "cuda-doctor", "version": __version__}}


@dataclass(slots=True)
class Report:
    """What one run found; ``to_dict`` is its JSON form."""

    facts: Facts
    results: list[Result]
    command: str = "check"
    host: str = field(default_factory=lambda: os.uname().nodename)  # socket.gethostname() without importing it
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()))
    problems: list[str] = field(default_factory=list)  # internal trouble worth showing (never silent)
    seconds: float | None = None  # how long probing and judging took; None for saved facts judged again
    #: Why the report could not be written where ``--save`` asked: the run then exits 2, and says so.
    save_error: str | None = None

    def counts(self) -> dict[str, int]:
        return {status.value: sum(r.status is status for r in self.results) for status in Status}

    def exit_code(self, fail_on: Severity) -> int:
        return EXIT_NO_VERDICT if self.save_error is not None else exit_code(self.results, fail_on)

    def to_dict(self, fail_on: Severity = Severity.ERROR) -> dict[str, Any]:
        return {
            **json_header(SCHEMA, SCHEMA_VERSION),
            "host": self.host,
            "created": self.created,
            "command": self.command,
            "facts": self.facts.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "problems": list(self.problems),
            "summary": {
                **self.counts(),
                "exit_code": self.exit_code(fail_on),
                "fail_on": fail_on.value,
                **({} if self.save_error is None else {"save_error": self.save_error}),
            },
        }

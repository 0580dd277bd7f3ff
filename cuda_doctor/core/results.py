"""Results: what judging one rule (for one subject) concluded.  Plain frozen data."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from cuda_doctor.core.families import about


class Status(str, enum.Enum):
    PASS = "pass"
    INFO = "info"  # worth knowing, nothing wrong
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"  # a fact the rule needs could not be gathered
    SKIPPED = "skipped"  # not applicable here, or deselected
    ERROR = "error"  # the rule itself broke


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"info": 1, "warning": 2, "error": 3}[self.value]

    @property
    def status(self) -> Status:
        return {"info": Status.INFO, "warning": Status.WARN, "error": Status.FAIL}[self.value]


#: Statuses that are findings, with the severity that each counts as for ``--fail-on``.
FINDING_RANK = {Status.INFO: 1, Status.WARN: 2, Status.FAIL: 3, Status.ERROR: 3}
#: A result's evidence when it names none (shared, so it cannot be changed).
NO_EVIDENCE: Mapping[str, Any] = MappingProxyType({})
_BY_VALUE = {s.value: s for s in Status}


class Result(NamedTuple):
    rule_id: str
    title: str
    category: str
    status: Status
    message: str
    subject: str | None = None  # "GPU 0", an image name, a file:line …
    fix: str | None = None
    commands: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    evidence: Mapping[str, Any] = NO_EVIDENCE  # the facts the verdict rests on
    origin: str | None = None  # the ``rules-dirs`` folder of a rule not shipped with cuda-doctor
    because: str | None = None  # the rule whose failure explains this one (a consequence; see ``caused``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule_id,
            "title": self.title,
            "category": self.category,
            "status": self.status.value,
            "subject": self.subject,
            "message": self.message,
            "fix": self.fix,
            "commands": list(self.commands),
            "links": list(self.links),
            "evidence": dict(self.evidence),
            "origin": self.origin,
            "because": self.because,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        get = data.get  # a fleet reads many thousands of these
        status = data["status"]
        return cls(
            rule_id=str(data["rule"]),
            title=str(get("title", "")),
            category=str(get("category", "")),
            status=_BY_VALUE[status] if type(status) is str and status in _BY_VALUE else Status(status),
            message=str(get("message", "")),
            subject=get("subject"),
            fix=get("fix"),
            commands=tuple(get("commands", ())),
            links=tuple(get("links", ())),
            evidence=dict(get("evidence", {})),
            origin=get("origin"),
            because=_rule_id(get("because")),
        )

    def rank(self) -> int:
        return FINDING_RANK.get(self.status, 0)


def _rule_id(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"'because' must be a rule id or null, got {value!r}")


def caused(results: list[Result]) -> dict[tuple[str, str | None], list[Result]]:
    """Each cause → the results its failure explains, in their order: keyed by the cause's rule
    id and subject (the consequence's own subject, or None for a cause about the whole machine).
    A result whose cause is not among ``results`` (left out of a file) stands on its own."""
    present = {(r.rule_id, r.subject) for r in results}
    out: dict[tuple[str, str | None], list[Result]] = {}
    for result in results:
        key = cause_of(result, present)
        if key is not None:
            out.setdefault(key, []).append(result)
    return out


def cause_of(result: Result, present: set[tuple[str, str | None]]) -> tuple[str, str | None] | None:
    """The (rule id, subject) of the result that explains ``result``, when it is in ``present``."""
    if result.because is None:
        return None
    for key in ((result.because, result.subject), (result.because, None)):
        if key in present and key != (result.rule_id, result.subject):
            return key
    return None


#: The exit status of a report with no verdict (also that of a usage or internal error).
EXIT_NO_VERDICT = 2
#: The facts every other verdict rests on: the driver, and the list of GPUs.
CORE_FACTS = ("driver.status", "gpu.count")


def is_core(result: Result) -> bool:
    """An unknown result that could not get a fact every verdict rests on."""
    return result.status is Status.UNKNOWN and any(name in CORE_FACTS for name in result.evidence)


def no_verdict(results: list[Result]) -> str | None:
    """Why ``results`` (none at ``--fail-on``) give no verdict: a core fact unknown or nothing judged; else None."""
    core = [name for name in CORE_FACTS if any(name in r.evidence for r in results if is_core(r))]
    if core:
        return " and ".join(about(name) for name in core) + " could not be checked"
    if any(r.status not in (Status.UNKNOWN, Status.SKIPPED) for r in results):
        return None
    return "nothing could be checked" if any(r.status is Status.UNKNOWN for r in results) else "nothing was checked"


def exit_code(results: list[Result], fail_on: Severity) -> int:
    """1 when something reaches ``fail_on``; else 2 when there is no verdict; else 0."""
    if any(r.rank() >= fail_on.rank for r in results):
        return 1
    return EXIT_NO_VERDICT if no_verdict(results) is not None else 0

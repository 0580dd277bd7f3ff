"""One cause, several failures, as data: tests/rules/causes/*.toml.

Each file starts from a case of tests/rules/cases (a healthy H200 with its smoke run), applies
its ``set`` / ``unset`` / ``unknown``, derives and judges every rule, and checks which results
another one's failure explains (``because``): those in its table, and no other.  ``failed``,
where given, is every failure and warning of the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.base.tomlcompat import tomllib
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.results import Result, Severity, Status, exit_code
from cuda_doctor.core.rules import judge, load_rules
from tests.rules.case_facts import apply_case

HERE = Path(__file__).parent
RULES = load_rules()


def case_start(name: str) -> Facts:
    facts = Facts.from_dict(json.loads((HERE / "h200_facts.json").read_text()))
    for path in sorted((HERE / "cases").glob("*.toml")):
        for case in tomllib.loads(path.read_text())["case"]:
            if case["name"] == name:
                return apply_case(facts, case)
    raise AssertionError(f"no rule case named {name!r}")


def _scenarios() -> list[Any]:
    return [
        pytest.param(tomllib.loads(path.read_text()), id=path.stem) for path in sorted((HERE / "causes").glob("*.toml"))
    ]


def _judged(scenario: dict[str, Any]) -> list[Result]:
    facts = apply_case(case_start(scenario["start"]), scenario)
    assert derive_all(facts) == []
    return judge(RULES, facts)


@pytest.mark.parametrize("scenario", _scenarios())
def test_each_failure_is_linked_to_its_cause_and_to_nothing_else(scenario: dict[str, Any]) -> None:
    results = _judged(scenario)
    findings = [r for r in results if r.status in (Status.FAIL, Status.WARN)]
    linked = {r.rule_id: r.because for r in results if r.because is not None}
    assert linked == scenario["because"]
    assert all(linked_id in {r.rule_id for r in findings} for linked_id in linked)
    if "failed" in scenario:
        assert sorted(r.rule_id for r in findings) == scenario["failed"]
    causes = {r.rule_id: r for r in results if r.rule_id in set(scenario["because"].values())}
    assert all(cause.status in (Status.FAIL, Status.WARN) and cause.because is None for cause in causes.values())


@pytest.mark.parametrize("scenario", _scenarios())
def test_a_linked_failure_still_counts(scenario: dict[str, Any]) -> None:
    results = _judged(scenario)
    unlinked = [r._replace(because=None) for r in results]
    assert exit_code(results, Severity.ERROR) == exit_code(unlinked, Severity.ERROR) == 1

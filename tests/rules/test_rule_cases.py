"""Every rule's cases, as data: tests/rules/cases/<ID>.toml against the H200 recording's facts.

Each case starts from the facts of a healthy H200 (h200_facts.json, taken from the recordings),
applies ``set`` / ``unset`` / ``unknown``, derives, judges the one rule, and checks the status of
its first result and, optionally, substrings of the message, the fix and the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.base.tomlcompat import tomllib
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.rules import judge_rule, load_rules
from tests.rules.case_facts import apply_case

HERE = Path(__file__).parent
CASES = HERE / "cases"


def _base() -> Facts:
    return Facts.from_dict(json.loads((HERE / "h200_facts.json").read_text()))


def _cases() -> list[Any]:
    params = []
    for path in sorted(CASES.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        for case in data["case"]:
            params.append(pytest.param(path.stem, case, id=f"{path.stem}-{case['name']}"))
    return params


RULES = {rule.id: rule for rule in load_rules()}


@pytest.mark.parametrize(("rule_id", "case"), _cases())
def test_rule_case(rule_id: str, case: dict[str, Any]) -> None:
    facts = apply_case(_base(), case)
    assert derive_all(facts) == []
    results = judge_rule(RULES[rule_id], facts)
    result = results[0]
    assert result.status.value == case["expect"], result.message
    if "message" in case:
        assert case["message"] in result.message
    if "fix" in case:
        assert result.fix is not None and case["fix"] in result.fix
    if "command" in case:
        assert any(case["command"] in c for c in result.commands), result.commands


def test_every_env_rule_has_a_passing_and_a_failing_case() -> None:
    findings = {"fail", "warn", "info"}
    for rule in RULES.values():
        if rule.kind != "env":
            continue
        path = CASES / f"{rule.id}.toml"
        assert path.is_file(), f"{rule.id} has no test cases ({path})"
        expected = {case["expect"] for case in tomllib.loads(path.read_text())["case"]}
        assert expected - findings, f"{rule.id} has no case where it does not fire"
        assert expected & findings, f"{rule.id} has no failing case"

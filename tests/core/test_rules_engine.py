"""The rule engine: operators, three-valued logic, validation errors, per-GPU binding."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Status
from cuda_doctor.core.rules import (
    Judgement,
    RuleFileError,
    evaluate,
    fact_values,
    judge,
    load_rule_file,
    load_rules,
    parse_rule,
    render_template,
    validate_condition,
)


def ev(cond: dict[str, Any], values: dict[str, Any], unknown: dict[str, str] | None = None) -> Any:
    validate_condition(cond, "test")
    return evaluate(cond, Facts(values, unknown or {}), lambda n: n)


@pytest.mark.parametrize(
    ("cond", "values", "expected"),
    [
        ({"fact": "a", "equals": 1}, {"a": 1}, True),
        ({"fact": "a", "equals": 1}, {"a": 2}, False),
        ({"fact": "a", "is_null": True}, {"a": None}, True),
        ({"fact": "a", "in": ["x", "y"]}, {"a": "y"}, True),
        ({"fact": "a", "matches": "^12\\."}, {"a": "12.4"}, True),
        ({"fact": "a", "version_gte": "535.104.05"}, {"a": "580.159.04"}, True),
        ({"fact": "a", "version_lt": "535.104.05"}, {"a": "470.82.01"}, True),
        ({"fact": "a", "gt": 0}, {"a": 3}, True),
        ({"fact": "a", "len_gte": 1}, {"a": []}, False),
        ({"fact": "a", "exists": False}, {}, True),
        ({"fact": "a", "version_gte": {"fact": "b"}}, {"a": "12.4", "b": "12.2"}, True),
        ({"fact": "a", "gt": 1}, {"a": "not a number"}, False),
        ({"not": {"fact": "a", "equals": 1}}, {"a": 1}, False),
    ],
)
def test_operators(cond: dict[str, Any], values: dict[str, Any], expected: bool) -> None:
    assert ev(cond, values) is expected


def test_three_valued_logic() -> None:
    missing = {"fact": "gone", "equals": 1}
    true = {"fact": "a", "equals": 1}
    false = {"fact": "a", "equals": 2}
    values = {"a": 1}
    assert ev({"all": [false, missing]}, values) is False
    assert ev({"any": [true, missing]}, values) is True
    assert type(ev({"all": [true, missing]}, values)).__name__ == "_Unknown"
    assert type(ev({"not": missing}, values)).__name__ == "_Unknown"


@pytest.mark.parametrize(
    ("cond", "fragment"),
    [
        ({"fact": "a", "eval": "1"}, "unknown operator 'eval'"),
        ({"fact": "a"}, "exactly one operator"),
        ({"equals": 1}, "needs 'fact'"),
        ({"all": []}, "non-empty list"),
        ({"all": [{"fact": "a", "equals": 1}], "fact": "b"}, "must stand alone"),
    ],
)
def test_invalid_conditions_are_named(cond: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RuleFileError, match=fragment):
        validate_condition(cond, "rules/X.toml: outcome[0].when")


@pytest.mark.parametrize(
    ("operator", "operand", "fragment"),
    [
        ("matches", '"(["', "field 'matches' is not a valid regular expression"),
        ("matches", "5", "field 'matches' must be a regular expression"),
        ("version_gte", '"not a version"', "field 'version_gte' is not a version"),
        ("version_lt", "12.10", "field 'version_lt' must be a version string"),
        ("gt", '"abc"', "field 'gt' must be a number, got 'abc'"),
        ("lte", "true", "field 'lte' must be a number, got True"),
        ("in", "5", "field 'in' must be a list of values, got 5"),
        ("not_in", '"a"', "field 'not_in' must be a list"),
        ("is_null", '"yes"', "field 'is_null' must be true or false"),
        ("exists", "1", "field 'exists' must be true or false"),
        ("len_gte", "-1", "field 'len_gte' must be a whole number"),
        ("contains", "[1]", "field 'contains' must be a string or a number"),
        ("equals", '{ facts = "b" }', "a table operand must be { fact = "),
    ],
)
def test_a_malformed_operand_is_refused_at_load_naming_file_and_field(
    tmp_path: Path, operator: str, operand: str, fragment: str
) -> None:
    """Before, these loaded and the condition was silently false on every run: the rule passed."""
    path = _write(
        tmp_path,
        BASE + "[[outcome]]\n"
        f'when = {{ all = [ {{ fact = "a", exists = true }}, {{ fact = "a", {operator} = {operand} }} ] }}\n'
        'message = "m"\n',
    )
    with pytest.raises(RuleFileError, match=re.escape(fragment)) as info:
        load_rule_file(path)
    assert str(info.value).startswith(f"{path}: outcome[0].when.all[1]: ")


def test_a_malformed_operand_in_applies_is_named_too(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        BASE + 'applies = { fact = "a", gte = "1.5" }\n[[outcome]]\nwhen = { fact = "a", equals = 1 }\nmessage = "m"\n',
    )
    with pytest.raises(RuleFileError, match=re.escape(f"{path}: field 'applies': field 'gte' must be a number")):
        load_rule_file(path)


def test_every_operator_checks_its_operand() -> None:
    """One check per operator, in the operator table: a new operator cannot forget it."""
    from cuda_doctor.core.rules import OPERATORS

    for name, operator in OPERATORS.items():
        assert callable(operator.test) and callable(operator.check), name
    refused = {name for name, operator in OPERATORS.items() if operator.check(object()) is not None}
    assert refused == set(OPERATORS) - {"equals", "not_equals"}


def _write(tmp_path: Path, text: str, name: str = "CDX001.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BASE = """
id = "CDX001"
title = "t"
category = "environment"
rationale = "r"
links = ["https://example.org/source"]
"""


def test_malformed_rule_file_names_file_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path, BASE + 'severity = "fatal"\n[[outcome]]\nwhen = { fact = "a", equals = 1 }\nmessage = "m"\n'
    )
    with pytest.raises(RuleFileError) as info:
        load_rule_file(path)
    assert str(path) in str(info.value) and "severity" in str(info.value)


def test_rule_file_that_is_not_toml(tmp_path: Path) -> None:
    path = _write(tmp_path, "id = [unclosed")
    with pytest.raises(RuleFileError, match="not valid TOML"):
        load_rule_file(path)


def test_missing_outcome_field(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + '[[outcome]]\nmessage = "m"\n')
    with pytest.raises(RuleFileError, match=r"outcome\[0\]: missing required field 'when'"):
        load_rule_file(path)


def test_duplicate_ids_across_directories(tmp_path: Path) -> None:
    _write(
        tmp_path,
        BASE.replace("CDX001", "CD101") + '[[outcome]]\nwhen = { fact = "a", equals = 1 }\nmessage = "m"\n',
        "CD101.toml",
    )
    with pytest.raises(RuleFileError, match="already used"):
        load_rules([tmp_path])


def test_for_each_binds_per_gpu_and_interpolates() -> None:
    rule = parse_rule(
        {
            "id": "CDX002",
            "title": "t",
            "category": "gpu",
            "rationale": "r",
            "for_each": "gpu",
            "outcome": [{"when": {"fact": "gpu.temp", "gt": 80}, "message": "{gpu.name} is hot ({gpu.temp} °C)"}],
            "pass_message": "{gpu.name} ok",
        },
        Path("CDX002.toml"),
    )
    facts = Facts({"gpu[0].name": "A", "gpu[0].temp": 50, "gpu[1].name": "B", "gpu[1].temp": 90})
    results = judge([rule], facts)
    assert [(r.subject, r.status) for r in results] == [("GPU 0", Status.PASS), ("GPU 1", Status.FAIL)]
    assert results[1].message == "B is hot (90 °C)"
    assert results[1].evidence == {"gpu[1].temp": 90}


def test_a_command_whose_fact_is_null_is_left_out_saying_why() -> None:
    rule = parse_rule(
        {
            "id": "CDX003",
            "title": "t",
            "category": "gpu",
            "rationale": "r",
            "outcome": [
                {
                    "when": {"fact": "broken", "equals": True},
                    "message": "broken",
                    "fix": "Run this:",
                    "commands": ["{fix_command}", "nvidia-smi -i {index}"],
                }
            ],
        },
        Path("CDX003.toml"),
    )
    [result] = judge([rule], Facts({"broken": True, "fix_command": None, "index": 0}))
    assert result.commands == ("nvidia-smi -i 0",)  # never the word "none" as a command
    assert result.fix == "Run this: (no command: fix_command has no value here)"


def test_a_rule_that_breaks_becomes_an_error_result() -> None:
    broken = parse_rule(
        {
            "id": "CDX004",
            "title": "t",
            "category": "gpu",
            "rationale": "r",
            "pass_message": "{a}",
            "outcome": [{"when": {"fact": "a", "equals": 1}, "message": "m"}],
        },
        Path("CDX004.toml"),
    )
    broken = broken._replace(outcomes=None)  # type: ignore[arg-type]  # simulate a rule object gone wrong
    result = judge([broken], Facts({"a": 1}))[0]
    assert result.status is Status.ERROR and "TypeError" in result.message


def test_select_ignore_and_severity_override() -> None:
    rules = load_rules()
    facts = Facts({"system.shm_bytes": 64 * 2**20})
    by_id = {r.rule_id: r for r in judge(rules, facts, select=["CD502"])}
    assert by_id["CD502"].status is Status.FAIL
    assert by_id["CD101"].status is Status.SKIPPED and by_id["CD101"].message == "deselected by --select/--ignore"
    ignored = {r.rule_id: r for r in judge(rules, facts, ignore=["CD5"])}
    assert ignored["CD502"].status is Status.SKIPPED
    softened = {r.rule_id: r for r in judge(rules, facts, judgement=Judgement({"CD502": "warning"}))}
    assert softened["CD502"].status is Status.WARN
    off = {r.rule_id: r for r in judge(rules, facts, judgement=Judgement({"CD502": "off"}))}
    assert off["CD502"].status is Status.SKIPPED and off["CD502"].message == 'ignored by config (severity = "off")'


def test_severity_by_prefix_or_category_applies_and_the_own_id_wins() -> None:
    """A severity entry is a selection pattern like select/ignore: it is applied, never accepted and dropped."""
    rules = load_rules()
    facts = Facts({"system.shm_bytes": 64 * 2**20})
    by_prefix = {r.rule_id: r for r in judge(rules, facts, judgement=Judgement({"CD5": "off"}))}
    assert by_prefix["CD502"].status is Status.SKIPPED and "ignored by config" in by_prefix["CD502"].message
    by_category = {r.rule_id: r for r in judge(rules, facts, judgement=Judgement({"container": "warning"}))}
    assert by_category["CD502"].status is Status.WARN
    own_id = {r.rule_id: r for r in judge(rules, facts, judgement=Judgement({"CD5": "off", "CD502": "warning"}))}
    assert own_id["CD502"].status is Status.WARN
    assert own_id["CD501"].status is Status.SKIPPED


def test_a_skipped_rule_says_what_left_it_out() -> None:
    """Not "(not applicable)": the configuration, or the command line, and which."""
    rules = load_rules()
    facts = Facts({"system.shm_bytes": 64 * 2**20})
    by_id = {
        r.rule_id: r.message
        for r in judge(rules, facts, select=["CD401"], ignore=["CD501"], configured=(["CD5"], ["CD503"]))
    }
    assert by_id["CD503"] == "ignored by config"
    assert by_id["CD101"] == "not selected by config"
    assert by_id["CD501"] == "deselected by --select/--ignore"
    assert by_id["CD502"] != "deselected by --select/--ignore"  # configured select, then judged


def test_every_shipped_rule_cites_a_source() -> None:
    for rule in load_rules():
        assert rule.links, f"{rule.id} has no links"
        assert all(link.startswith("https://") for link in rule.links), rule.id


OUTCOME = '[[outcome]]\nwhen = { fact = "a", equals = 1 }\nmessage = "m"\n'


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ('pass_mesage = "ok"\n' + OUTCOME, "unknown field 'pass_mesage'"),
        (OUTCOME + 'fixx = "f"\n', r"outcome\[0\]: unknown field 'fixx'"),
    ],
)
def test_a_misspelt_field_is_an_error_not_ignored(tmp_path: Path, extra: str, fragment: str) -> None:
    path = _write(tmp_path, BASE + extra)
    with pytest.raises(RuleFileError, match=fragment):
        load_rule_file(path)


LINT = """
id = "CDL001"
kind = "lint"
title = "t"
category = "code"
rationale = "r"
message = "m"
links = ["https://example.org/source"]
"""


@pytest.mark.parametrize(
    ("detector", "fragment"),
    [
        ('detector = "torch_cuda_ampp"\n', "field 'detector': no detector named 'torch_cuda_ampp'"),
        ('detector = "cudnn_benchmark"\n', "field 'detector': 'cudnn_benchmark' reports CDL010, not CDL001"),
        ("", "missing required field 'detector'"),
    ],
)
def test_a_lint_rule_must_name_the_detector_that_reports_it(tmp_path: Path, detector: str, fragment: str) -> None:
    path = _write(tmp_path, LINT + detector, "CDL001.toml")
    with pytest.raises(RuleFileError, match=fragment) as info:
        load_rule_file(path)
    assert str(path) in str(info.value)


def test_a_lint_rule_naming_its_detector_loads(tmp_path: Path) -> None:
    rule = load_rule_file(_write(tmp_path, LINT + 'detector = "torch_cuda_amp"\n', "CDL001.toml"))
    assert (rule.kind, rule.detector) == ("lint", "torch_cuda_amp")


def test_one_renderer_for_facts_and_captures() -> None:
    facts = Facts({"gpu[1].name": "H200", "gpu[1].ok": True})
    bind = {"gpu.name": "gpu[1].name", "gpu.ok": "gpu[1].ok"}.get
    values = fact_values(facts, lambda name: bind(name) or name)
    # an unknown fact says so, and why, in words: never a bare "?" or the fact's name
    assert render_template("{gpu.name} ok={gpu.ok} {gpu.gone}", values) == (
        "H200 ok=yes unknown (nothing was gathered about the GPUs)"
    )
    facts.mark_unknown("gpu.gone", "NVML timed out")
    assert render_template("{gpu.gone}", values) == "unknown (NVML timed out)"
    assert render_template("`{name}` {detail}", {"name": "x"}.get) == "`x` unknown"


def test_rules_left_when_the_judging_deadline_passes_are_errors_saying_so() -> None:
    rules = load_rules()
    results = judge(rules, Facts(), seconds=0.0)
    env = [rule for rule in rules if rule.kind == "env"]
    assert len(results) >= len(env)
    assert all(
        r.status is Status.ERROR and r.message.startswith("not judged: judging took more than 0 s") for r in results
    )


def test_without_re2_the_shipped_rules_load_and_a_repository_pattern_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from cuda_doctor.core import rules as engine

    monkeypatch.setitem(sys.modules, "re2", None)  # an installation without google-re2
    engine.linear_regex.cache_clear()
    engine.has_re2.cache_clear()
    try:
        assert any(rule.id == "CD213" for rule in load_rules())  # its patterns are compiled by re
        own = tmp_path / "XYZ001.toml"
        text = [
            'id = "XYZ001"',
            'title = "t"',
            'category = "environment"',
            'severity = "error"',
            'rationale = "r"',
            'links = ["https://example.invalid/"]',
            "[[outcome]]",
            'when = { fact = "a", matches = "b" }',
            'message = "m"',
        ]
        own.write_text("\n".join(text) + "\n")
        with pytest.raises(RuleFileError, match="needs google-re2"):
            load_rule_file(own)
    finally:
        engine.linear_regex.cache_clear()
        engine.has_re2.cache_clear()

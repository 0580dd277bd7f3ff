"""``explains``: a finding that explains other rules' failures, linked as ``because`` when it failed in the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result, Status, caused
from cuda_doctor.core.rules import Judgement, RuleFileError, judge, load_rules, parse_rule


def rule(rule_id: str, fails_when: str, *, explains: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A rule that fails when the fact ``fails_when`` is true (per GPU with ``for_each = "gpu"``)."""
    outcome: dict[str, Any] = {"when": {"fact": fails_when, "equals": True}, "message": f"{rule_id} failed"}
    if explains is not None:
        outcome["explains"] = explains
    return {
        "id": rule_id,
        "title": f"title of {rule_id}",
        "category": "gpu",
        "rationale": "why",
        "requires": [fails_when],
        "outcome": [outcome],
        **extra,
    }


def parsed(*rules: dict[str, Any]) -> list[Any]:
    return [parse_rule(data, Path(f"/rules/{data['id']}.toml")) for data in rules]


def because(results: list[Result]) -> dict[tuple[str, str | None], str | None]:
    return {(r.rule_id, r.subject): r.because for r in results}


GPUS = {"gpu.count": 2, "gpu[0].name": "H200", "gpu[1].name": "H200"}


def test_a_failure_that_a_failed_cause_explains_names_it() -> None:
    rules = parsed(rule("CD001", "a", explains=["CD002", "CD003"]), rule("CD002", "b"), rule("CD003", "c"))
    results = judge(rules, Facts({"a": True, "b": True, "c": False}))
    assert because(results) == {("CD001", None): None, ("CD002", None): "CD001", ("CD003", None): None}


def test_nothing_is_linked_when_the_cause_did_not_fail() -> None:
    rules = parsed(rule("CD001", "a", explains=["CD002"]), rule("CD002", "b"))
    assert because(judge(rules, Facts({"a": False, "b": True}))) == {("CD001", None): None, ("CD002", None): None}
    unknown = judge(rules, Facts({"b": True}, {"a": "nvidia-smi did not answer"}))
    assert [r.status for r in unknown] == [Status.UNKNOWN, Status.FAIL]
    assert because(unknown)[("CD002", None)] is None


def test_a_deselected_cause_explains_nothing() -> None:
    rules = parsed(rule("CD001", "a", explains=["CD002"]), rule("CD002", "b"))
    results = judge(rules, Facts({"a": True, "b": True}), ignore=["CD001"])
    assert because(results) == {("CD001", None): None, ("CD002", None): None}


def test_a_per_gpu_cause_explains_only_results_about_the_same_gpu() -> None:
    rules = parsed(
        rule("CD001", "gpu.broken", explains=["CD002"], for_each="gpu"),
        rule("CD002", "gpu.slow", for_each="gpu"),
        rule("CD003", "whole", explains=["CD002"]),
    )
    facts = {**GPUS, "gpu[0].broken": False, "gpu[1].broken": True, "gpu[0].slow": True, "gpu[1].slow": True}
    results = judge(rules, Facts({**facts, "whole": False}))
    assert because(results)[("CD002", "GPU 0")] is None
    assert because(results)[("CD002", "GPU 1")] == "CD001"
    # a cause about the whole machine explains every GPU's result
    whole = judge(rules, Facts({**facts, "gpu[1].broken": False, "whole": True}))
    assert because(whole)[("CD002", "GPU 0")] == because(whole)[("CD002", "GPU 1")] == "CD003"


def test_a_per_gpu_cause_does_not_explain_a_result_about_the_whole_machine() -> None:
    rules = parsed(rule("CD001", "gpu.broken", explains=["CD002"], for_each="gpu"), rule("CD002", "b"))
    results = judge(rules, Facts({**GPUS, "gpu[0].broken": True, "gpu[1].broken": True, "b": True}))
    assert because(results)[("CD002", None)] is None


def test_a_chain_names_its_root() -> None:
    rules = parsed(rule("CD001", "a", explains=["CD002"]), rule("CD002", "b", explains=["CD003"]), rule("CD003", "c"))
    results = judge(rules, Facts({"a": True, "b": True, "c": True}))
    assert because(results) == {("CD001", None): None, ("CD002", None): "CD001", ("CD003", None): "CD001"}
    # without the root failing, the middle is the cause
    middle = judge(rules, Facts({"a": False, "b": True, "c": True}))
    assert because(middle)[("CD003", None)] == "CD002"


def test_the_outcome_list_replaces_the_rule_list() -> None:
    data = rule("CD001", "a", explains=["CD003"])
    data["explains"] = ["CD002"]
    data["outcome"].append({"when": {"fact": "z", "equals": True}, "message": "other", "severity": "warning"})
    rules = parsed(data, rule("CD002", "b"), rule("CD003", "c"))
    first = judge(rules, Facts({"a": True, "z": False, "b": True, "c": True}))
    assert because(first)[("CD002", None)] is None and because(first)[("CD003", None)] == "CD001"
    second = judge(rules, Facts({"a": False, "z": True, "b": True, "c": True}))
    assert because(second)[("CD002", None)] == "CD001" and because(second)[("CD003", None)] is None


def test_a_warning_cause_links_and_an_info_one_does_not() -> None:
    rules = parsed(rule("CD001", "a", explains=["CD002"], severity="warning"), rule("CD002", "b"))
    assert because(judge(rules, Facts({"a": True, "b": True})))[("CD002", None)] == "CD001"
    quiet = judge(rules, Facts({"a": True, "b": True}), judgement=Judgement({"CD001": "info"}))
    assert because(quiet)[("CD002", None)] is None


@pytest.mark.parametrize(
    ("explains", "where", "problem"),
    [
        ("CD002", "outcome", "must be a list of rule ids"),
        (["cd002"], "outcome", "must be a list of rule ids"),
        (["CD001"], "outcome", "cannot explain itself"),
        (["CD001"], "rule", "cannot explain itself"),
        ([2], "rule", "must be a list of rule ids"),
    ],
)
def test_a_malformed_explains_names_the_file_and_the_field(explains: Any, where: str, problem: str) -> None:
    data = rule("CD001", "a")
    (data["outcome"][0] if where == "outcome" else data)["explains"] = explains
    with pytest.raises(RuleFileError, match=f"CD001.toml.*'explains'.*{problem}"):
        parsed(data)


def test_a_pass_explains_nothing() -> None:
    data = rule("CD001", "a")
    data["outcome"].insert(
        0, {"when": {"fact": "a", "equals": False}, "status": "pass", "message": "ok", "explains": ["CD002"]}
    )
    with pytest.raises(RuleFileError, match="outcome\\[0\\]: field 'explains': a pass explains no failure"):
        parsed(data)


def write_rule(folder: Path, rule_id: str, explains: list[str]) -> None:
    names = ", ".join(f'"{name}"' for name in explains)
    (folder / f"{rule_id}.toml").write_text(
        f'id = "{rule_id}"\ntitle = "t"\ncategory = "gpu"\nrationale = "r"\nexplains = [{names}]\n'
        f'[[outcome]]\nwhen = {{ fact = "a", equals = true }}\nmessage = "m"\n'
    )


def test_loading_refuses_an_id_that_names_no_rule(tmp_path: Path) -> None:
    write_rule(tmp_path, "XX001", ["XX009"])
    with pytest.raises(RuleFileError, match=r"XX001\.toml: field 'explains': no environment rule XX009"):
        load_rules([tmp_path], builtin=False)


def test_loading_refuses_a_loop(tmp_path: Path) -> None:
    write_rule(tmp_path, "XX001", ["XX002"])
    write_rule(tmp_path, "XX002", ["XX003"])
    write_rule(tmp_path, "XX003", ["XX001"])
    with pytest.raises(RuleFileError, match="field 'explains': XX001 explains, through others, itself"):
        load_rules([tmp_path], builtin=False)


def test_the_shipped_rules_load_with_their_links() -> None:
    rules = {r.id: r for r in load_rules()}
    stub = next(o for o in rules["CD702"].outcomes if "stub library" in o.message)
    assert stub.explains == ("CD111", "CD202", "CD245", "CD701", "CD703")


def test_because_survives_a_saved_report_and_a_bad_one_is_refused() -> None:
    linked = Result("CD202", "t", "framework", Status.FAIL, "m", because="CD702")
    assert Result.from_dict(linked.to_dict()) == linked
    assert Result.from_dict({"rule": "CD1", "status": "pass"}).because is None
    with pytest.raises(ValueError, match="'because' must be a rule id"):
        Result.from_dict({**linked.to_dict(), "because": ["CD702"]})


def test_caused_groups_by_cause_and_leaves_out_a_cause_that_is_not_there() -> None:
    cause = Result("CD001", "t", "gpu", Status.FAIL, "m")
    on_gpu = Result("CD002", "t", "gpu", Status.FAIL, "m", subject="GPU 0", because="CD001")
    orphan = Result("CD003", "t", "gpu", Status.FAIL, "m", because="CD009")
    assert caused([cause, on_gpu, orphan]) == {("CD001", None): [on_gpu]}

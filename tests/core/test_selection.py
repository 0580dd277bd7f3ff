"""Selecting rules: one matcher for both kinds; a rule of the other kind is a usage error."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cuda_doctor.core.config import Config
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Status
from cuda_doctor.core.rules import judge, load_rules
from cuda_doctor.core.selection import DESELECTED, SelectionError, check_selection, selected_ids, unknown_patterns
from tests.conftest import run_doctor

TESTS = Path(__file__).resolve().parents[1]
H200_FACTS = TESTS / "rules" / "h200_facts.json"


def doctor(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_doctor(args, cwd=cwd)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "t.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    (tmp_path / "facts.json").write_text(json.dumps({"facts": json.loads(H200_FACTS.read_text())}))
    return tmp_path


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["check", "--facts", "facts.json", "--select", "CDL001"],
            "--select: CDL001 names only lint rules; run them with `cuda-doctor lint --select CDL001`",
        ),
        (
            ["check", "--facts", "facts.json", "--select", "CD101,CDL"],
            "--select: CDL names only lint rules; run them with `cuda-doctor lint --select CDL`",
        ),
        (
            ["lint", "--select", "CD101", "t.py"],
            "--select: CD101 names only environment rules; run them with `cuda-doctor check --select CD101`",
        ),
        (
            ["lint", "--select", "driver", "t.py"],
            "--select: DRIVER names only environment rules; run them with `cuda-doctor check --select DRIVER`",
        ),
    ],
)
def test_selecting_a_rule_of_the_other_kind_is_a_usage_error(project: Path, args: list[str], line: str) -> None:
    proc = doctor(args, project)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"cuda-doctor: error: {line}"]


def test_a_shared_category_or_prefix_selects_in_both_commands(project: Path) -> None:
    check = doctor(["check", "--facts", "facts.json", "--select", "docker", "--format", "json"], project)
    ran = [r for r in json.loads(check.stdout)["results"] if r["message"] not in DESELECTED]
    assert ran and all(r["category"] == "docker" for r in ran)
    # the saved facts have no Docker facts: every docker rule is skipped, so there is no verdict
    assert check.returncode == 2 and json.loads(check.stdout)["summary"]["exit_code"] == 2
    lint = doctor(["lint", "--select", "CD", "t.py"], project)
    assert lint.returncode == 0 and "CDL001" in lint.stdout


def test_configured_entries_of_the_other_kind_do_not_filter() -> None:
    rules = load_rules()
    env = [rule for rule in rules if rule.kind == "env"]
    lint = [rule for rule in rules if rule.kind == "lint"]
    assert selected_ids(env, ["CDL001"], []) == {rule.id for rule in env}
    assert selected_ids(lint, ["CD1", "CDL1"], ["CDL104"]) == {"CDL101", "CDL102", "CDL103", "CDL105", "CDL106"}
    results = judge(rules, Facts({}), select=["CDL"])
    assert results and all(r.message not in DESELECTED for r in results)
    assert all(r.status is Status.SKIPPED for r in judge(rules, Facts({}), select=["CD101"]) if r.rule_id != "CD101")


def test_one_matcher_ids_prefixes_and_categories_in_any_case() -> None:
    rules = load_rules()
    assert unknown_patterns(rules, ["cd1", "cdl0", "Code", "driver", "CD99", "nope"]) == ["CD99", "nope"]
    with pytest.raises(SelectionError, match=r"^pyproject.toml: field 'severity': no rule matches CDL9"):
        check_selection(rules, "lint", Config(severity={"CDL9": "off"}, source=Path("pyproject.toml")))
    check_selection(rules, "lint", Config(select=("CD101",)), ["CDL0"], ["CD101"])  # configured and --ignore: fine

"""A check that checked nothing must never pass: each case as a real ``cuda-doctor`` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
H200_FACTS = TESTS / "rules" / "h200_facts.json"


def doctor(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(TESTS.parent) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "cuda_doctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=180,
    )


def h200_report(tmp_path: Path) -> Path:
    path = tmp_path / "h200.json"
    path.write_text(json.dumps({"facts": json.loads(H200_FACTS.read_text())}))
    return path


# -- user rules whose operands cannot work -------------------------------------------------------

USER_RULE = """
id = "CDU001"
title = "A user rule"
category = "environment"
rationale = "r"
links = ["https://example.org/source"]

[[outcome]]
when = {{ fact = "driver.version", {operator} = {operand} }}
message = "m"
"""


def test_a_user_rule_with_a_malformed_operand_is_refused_not_passed(tmp_path: Path) -> None:
    rules = tmp_path / "my-rules"
    rules.mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-doctor]\nrules-dirs = ["my-rules"]\n')
    for operator, operand, said in (
        ("matches", '"(["', "field 'matches' is not a valid regular expression"),
        ("version_gte", '"not a version"', "field 'version_gte' is not a version"),
        ("gt", '"abc"', "field 'gt' must be a number"),
        ("in", "5", "field 'in' must be a list of values"),
    ):
        (rules / "CDU001.toml").write_text(USER_RULE.format(operator=operator, operand=operand))
        proc = doctor(["check", "--facts", str(h200_report(tmp_path))], cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout
        assert proc.stdout == ""
        assert f"{rules / 'CDU001.toml'}: outcome[0].when: {said}" in proc.stderr


# -- a configured selection that would leave nothing to check ----------------------------------


def test_an_empty_pattern_in_the_configuration_is_an_error(tmp_path: Path) -> None:
    report = h200_report(tmp_path)
    for field, value in (("ignore", '[""]'), ("select", '["  "]'), ("severity", '{ "" = "off" }')):
        (tmp_path / "pyproject.toml").write_text(f"[tool.cuda-doctor]\n{field} = {value}\n")
        proc = doctor(["check", "--facts", str(report)], cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout
        assert f"{tmp_path / 'pyproject.toml'}: field '{field}' has an empty entry" in proc.stderr
        assert "nothing failed" not in proc.stdout


def test_an_empty_select_list_runs_every_rule(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.cuda-doctor]\nselect = []\n")
    proc = doctor(["check", "--facts", str(h200_report(tmp_path)), "--format", "json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert not any(r["message"] == "deselected" for r in results)
    assert sum(r["status"] == "pass" for r in results) >= 10

"""A check that checked nothing must never pass: each case as a real ``cuda-doctor`` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuda_doctor.core.selection import DESELECTED
from tests.conftest import run_doctor

TESTS = Path(__file__).resolve().parents[1]
H200_FACTS = TESTS / "rules" / "h200_facts.json"


def doctor(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_doctor(args, cwd=cwd, env={**os.environ, **(env or {})})


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
    assert not any(r["message"] in DESELECTED for r in results)
    assert sum(r["status"] == "pass" for r in results) >= 10


# -- a saved report that knows almost nothing ---------------------------------------------------


def test_a_report_without_driver_and_gpus_has_no_verdict_in_every_format(tmp_path: Path) -> None:
    """It said "GPUs: not applicable: no GPU found" and exited 0; nothing about them was known."""
    tiny = tmp_path / "tiny.json"
    tiny.write_text('{"facts":{"values":{"a":1},"unknown":{}}}')
    text = doctor(["check", "--facts", str(tiny)], cwd=tmp_path)
    assert text.returncode == 2, text.stdout
    assert "no GPU found" not in text.stdout
    assert "no verdict: the NVIDIA driver and the GPUs could not be checked (exit 2)" in text.stdout
    assert "could not check: nothing was gathered about the GPUs" in text.stdout
    for fmt in ("markdown", "json", "oneline"):
        proc = doctor(["check", "--facts", str(tiny), "--format", fmt], cwd=tmp_path)
        assert proc.returncode == 2, (fmt, proc.stdout)
    summary = json.loads(doctor(["check", "--facts", str(tiny), "--format", "json"], cwd=tmp_path).stdout)["summary"]
    assert summary["exit_code"] == 2


def test_a_finding_is_a_verdict_even_when_the_gpus_are_unknown(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"facts": {"values": {"system.shm_bytes": 64 * 2**20}, "unknown": {}}}))
    proc = doctor(["check", "--facts", str(report)], cwd=tmp_path)
    assert proc.returncode == 1 and "findings at or above 'error'" in proc.stdout


# -- a fast check on this machine (the fake nvidia-smi stands for the H200) ----------------------


def live(fake: Any, args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    ctx = fake.ctx()
    return doctor(
        args,
        cwd=cwd,
        env={**ctx.env, "CUDA_DOCTOR_DISABLE_NVML": "1", "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"], **env},
    )


def test_fast_with_python_is_refused(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    """--python was ignored under --fast and the check said "ready to train"."""
    for command in ("check", "facts"):
        proc = live(fake_nvidia_smi, [command, "--fast", "--python", sys.executable], tmp_path)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith("cuda-doctor: error: --python cannot be combined with --fast")


def test_fast_says_the_framework_was_not_checked(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    proc = live(fake_nvidia_smi, ["check", "--fast"], tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "ready to train" not in proc.stdout
    assert "driver and GPUs ready; framework not checked (--fast) (exit 0)" in proc.stdout
    assert "[-] Framework build  (not checked (--fast))" in proc.stdout


def test_ignored_and_off_rules_say_so(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    """They showed as "(not applicable)"."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cuda-doctor]\nignore = ["environment"]\nseverity = { CD502 = "off", CD501 = "off" }\n'
    )
    proc = live(fake_nvidia_smi, ["check", "--fast"], tmp_path)
    assert "[-] Environment  (ignored by config)" in proc.stdout
    assert '[-] Container  (ignored by config (severity = "off"))' in proc.stdout
    assert "nothing failed in the selected checks" in proc.stdout
    proc = live(fake_nvidia_smi, ["check", "--fast", "--ignore", "health", "-v"], tmp_path)
    assert "deselected by --select/--ignore" in proc.stdout


def test_exec_does_not_blame_an_option_the_user_never_gave(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    proc = live(fake_nvidia_smi, ["exec", "--", "true"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "--fast" not in proc.stderr
    assert "[-] Framework build  (not checked at container start (exec runs the fast check))" in proc.stderr
    assert "framework not checked at container start (exec runs the fast check)" in proc.stderr

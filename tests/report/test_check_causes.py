"""One cause shown once: the toolkit's stub libcuda first on LD_LIBRARY_PATH, through ``check --facts``
in every format, and the checklist's handling of consequences (``Result.because``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cuda_doctor.base.tomlcompat import tomllib
from cuda_doctor.cli import cli
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report.check.text import render
from tests.rules.case_facts import apply_case
from tests.rules.test_causes import HERE as RULE_TESTS
from tests.rules.test_causes import case_start

STUB = tomllib.loads((RULE_TESTS / "causes" / "stub_libcuda_on_ld_library_path.toml").read_text())
CAUSE = "the libcuda that was loaded, /usr/local/cuda/lib64/stubs/libcuda.so.1, is the CUDA toolkit's stub library"
CONSEQUENCES = {  # a piece of each consequence's message
    "CD111": "CUDA error 34 (cudaErrorStubLibrary",
    "CD202": "torch.cuda.is_available() is False: CUDA initialization",
    "CD245": "JAX sees 0 of the 1 GPU(s) here",
    "CD701": "the GPU smoke run failed: driver level",
    "CD703": "torch cannot use CUDA",
}
MORE = "5 more checks failed because of this: CD111, CD202, CD245, CD701, CD703"


def check(tmp_path: Path, *args: str) -> Any:
    facts = apply_case(case_start(STUB["start"]), STUB)
    path = tmp_path / "stub.json"
    path.write_text(json.dumps({"facts": facts.to_dict()}))
    return CliRunner().invoke(cli, ["check", "--facts", str(path), *args], catch_exceptions=False)


def test_the_checklist_shows_the_cause_once_with_what_it_explains(tmp_path: Path) -> None:
    result = check(tmp_path)
    assert result.exit_code == 1  # the consequences still count
    lines = result.output.splitlines()
    [cause] = [n for n, line in enumerate(lines) if CAUSE in line]
    assert lines[cause].startswith("    ✗ ")
    assert lines[cause + 1].startswith("        fix: Take /usr/local/cuda/lib64/stubs out of LD_LIBRARY_PATH")
    assert lines[cause + 2] == "          $ export LD_LIBRARY_PATH=/usr/local/nvidia/lib64"
    assert lines[cause + 3].startswith("        (CD702: ")
    assert lines[cause + 4] == f"        {MORE}"
    assert not [piece for piece in CONSEQUENCES.values() if piece in result.output]
    assert "[✗] Framework build  (" in result.output and "; CD202, CD245 failed because of CD702)" in result.output
    assert "CD111 failed because of CD702" in result.output
    assert "CD701, CD703 failed because of CD702" not in result.output  # said under the cause, in its own section
    assert lines[-1].startswith("6 failed, ")


def test_verbose_shows_each_consequence_under_its_cause(tmp_path: Path) -> None:
    lines = check(tmp_path, "-v").output.splitlines()
    more = lines.index(f"        {MORE}")
    shown = [n for n, line in enumerate(lines) if line.startswith("            ✗ ")]  # one level under the cause
    assert len(shown) == len(CONSEQUENCES) and min(shown) == more + 1
    for at, (rule_id, piece) in zip(shown, CONSEQUENCES.items(), strict=True):
        assert piece in lines[at], (rule_id, lines[at])
        assert any(line.startswith(f"                ({rule_id}: ") for line in lines[at : at + 6])
    assert sum(CAUSE in line for line in lines) == 1


def test_json_keeps_every_result_with_its_cause(tmp_path: Path) -> None:
    result = check(tmp_path, "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    failed = {r["rule"]: r["because"] for r in report["results"] if r["status"] == "fail"}
    assert failed == {"CD702": None, **dict.fromkeys(CONSEQUENCES, "CD702")}
    assert report["summary"]["fail"] == 6
    assert all("because" in r for r in report["results"])


def test_markdown_lists_the_consequences_under_the_cause(tmp_path: Path) -> None:
    plain = check(tmp_path, "--format", "markdown").output
    assert f"  - {MORE}" in plain and not [piece for piece in CONSEQUENCES.values() if piece in plain]
    verbose = check(tmp_path, "--format", "markdown", "-v").output.splitlines()
    more = verbose.index(f"  - {MORE}")
    assert verbose[more + 1].startswith("    - ✗ `CD111` CUDA error 34")


def test_oneline_names_the_cause(tmp_path: Path) -> None:
    line = check(tmp_path, "--format", "oneline").output
    assert line.startswith("FAIL CD702 the libcuda that was loaded")
    assert line.rstrip("\n").endswith("(+5 more because of CD702: CD111, CD202, CD245, CD701, CD703)")


def result(rule: str, status: Status, category: str = "gpu", subject: str | None = None, **more: Any) -> Result:
    return Result(rule, f"title of {rule}", category, status, f"message of {rule}", subject=subject, **more)


def text(*results: Result, verbose: bool = False) -> list[str]:
    report = Report(Facts(), list(results), host="node1", created="2026-01-01T00:00:00+00:00")
    return render(report, verbose=verbose, fail_on=Severity.ERROR).splitlines()


def test_a_cause_on_one_gpu_counts_per_gpu_consequences_by_rule() -> None:
    lines = text(
        result("CD601", Status.FAIL, subject="GPU 1"),
        result("CD604", Status.WARN, "health", subject="GPU 1", because="CD601"),
        result("CD605", Status.WARN, "health", subject="GPU 1", because="CD601"),
        result("CD605", Status.WARN, "health", subject="GPU 0"),
    )
    assert "        2 more checks warned because of this: CD604, CD605" in lines
    assert "    ! [GPU 0] message of CD605" in lines  # not explained: shown in its section
    assert "    (CD604, CD605 warned because of CD601)" in lines


def test_a_consequence_whose_cause_is_missing_is_shown_where_it_belongs() -> None:
    lines = text(result("CD202", Status.FAIL, "framework", because="CD702"))
    assert "    ✗ message of CD202" in lines and not [line for line in lines if "because of" in line]


def test_mixed_consequences_and_counts_of_one_rule_on_several_gpus() -> None:
    lines = text(
        result("CD101", Status.FAIL, "driver"),
        result("CD231", Status.FAIL, subject="GPU 0", because="CD101"),
        result("CD231", Status.FAIL, subject="GPU 1", because="CD101"),
        result("CD302", Status.WARN, because="CD101"),
    )
    assert "        3 more checks failed or warned because of this: CD231 ×2, CD302" in lines
    assert "[✗] GPUs  (CD231 ×2, CD302 failed or warned because of CD101)" in lines


def test_the_rule_list_in_json_says_what_each_rule_explains() -> None:
    from cuda_doctor.core.rules import load_rules
    from cuda_doctor.report.rules import render_rules

    listed = {rule["id"]: rule for rule in json.loads(render_rules(load_rules(), "json"))}
    assert listed["CD702"]["explains"] == ["CD111", "CD202", "CD245", "CD701", "CD703"]  # by its stub outcomes
    assert listed["CD101"]["explains"] == []

"""check, facts, rules and explain through click's runner, and end to end as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cuda_doctor.cli import cli
from tests.conftest import run_doctor

TESTS = Path(__file__).resolve().parents[1]
H200_FACTS = TESTS / "rules" / "h200_facts.json"


def run(*args: str, cwd: Path | None = None) -> Any:
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli, list(args), catch_exceptions=False)
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


def facts_file(tmp_path: Path, **changes: Any) -> Path:
    data = json.loads(H200_FACTS.read_text())
    data["values"].update(changes)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"facts": data}))
    return path


def test_healthy_h200_facts_pass(tmp_path: Path) -> None:
    result = run("check", "--facts", str(facts_file(tmp_path)), cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "ready to train" in result.output
    assert "driver 580.159.04 (CUDA 13.0)" in result.output


def test_old_driver_fails_with_fix(tmp_path: Path) -> None:
    path = facts_file(tmp_path, **{"driver.version": "535.104.05", "driver.cuda_version": "12.2"})
    result = run("check", "--facts", str(path), cwd=tmp_path)
    assert result.exit_code == 1
    assert "✗" in result.output and "580.65.06" in result.output
    # the interpreter that was inspected installs, after the installed build is removed
    assert "$ /opt/torch/.venv/bin/python3 -m pip uninstall -y torch" in result.output
    assert (
        "$ /opt/torch/.venv/bin/python3 -m pip install 'torch==2.11.0' --index-url https://download.pytorch.org/whl/cu126"
        in result.output
    )


def test_no_command_is_printed_as_a_question_mark(tmp_path: Path) -> None:
    path = facts_file(tmp_path, **{"driver.version": "418.67", "driver.cuda_version": "10.1"})
    result = run("check", "--facts", str(path), cwd=tmp_path)
    assert result.exit_code == 1
    assert "$ ?" not in result.output and "no command: no PyTorch wheel runs on driver 418.67" in result.output


def test_json_is_complete_and_versioned(tmp_path: Path) -> None:
    path = facts_file(tmp_path, **{"system.shm_bytes": 64 * 2**20})
    result = run("check", "--facts", str(path), "--format", "json", cwd=tmp_path)
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["schema"] == "cuda-doctor/report" and report["schema_version"] == 1
    assert report["summary"]["exit_code"] == 1
    statuses = {r["rule"]: r["status"] for r in report["results"] if r["subject"] is None}
    assert statuses["CD502"] == "fail"
    assert report["facts"]["values"]["driver.version"] == "580.159.04"


def test_fail_on_warning(tmp_path: Path) -> None:
    path = facts_file(tmp_path, **{"env.nccl": {"NCCL_P2P_DISABLE": "1"}})
    assert run("check", "--facts", str(path), cwd=tmp_path).exit_code == 0
    assert run("check", "--facts", str(path), "--fail-on", "warning", cwd=tmp_path).exit_code == 1


def test_markdown(tmp_path: Path) -> None:
    path = facts_file(tmp_path, **{"system.shm_bytes": 64 * 2**20})
    result = run("check", "--facts", str(path), "--format", "markdown", cwd=tmp_path)
    assert result.output.startswith("## cuda-doctor report")
    assert "`CD502`" in result.output and "--ipc=host" in result.output


def test_verbose_shows_passing_checks_with_evidence(tmp_path: Path) -> None:
    result = run("check", "--facts", str(facts_file(tmp_path)), "-v", cwd=tmp_path)
    assert "CD102" in result.output and 'derived.driver_cuda_support = "full"' in result.output


def test_save_writes_the_full_report(tmp_path: Path) -> None:
    saved = tmp_path / "out" / "node.json"
    run("check", "--facts", str(facts_file(tmp_path)), "--save", str(saved), cwd=tmp_path)
    assert json.loads(saved.read_text())["facts"]["values"]["gpu[0].name"] == "NVIDIA H200"


def test_config_selects_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-doctor]\nseverity = { CD502 = "warning" }\n')
    path = facts_file(tmp_path, **{"system.shm_bytes": 64 * 2**20})
    assert run("check", "--facts", str(path), cwd=tmp_path).exit_code == 0
    assert run("check", "--facts", str(path), "--select", "CD502", "--fail-on", "warning", cwd=tmp_path).exit_code == 1


def test_rules_and_explain(tmp_path: Path) -> None:
    listing = run("rules", cwd=tmp_path)
    assert "CD102" in listing.output and "CD502" in listing.output
    explained = run("explain", "cd102", cwd=tmp_path)
    assert "minor-version compatibility" in explained.output
    assert "https://docs.nvidia.com/" in explained.output


def test_docs_rules_reference_is_current() -> None:
    repo = TESTS.parent
    generated = run("rules", "--format", "markdown", cwd=repo).output
    current = (repo / "docs" / "rules.md").read_text()
    assert current == generated, "docs/rules.md is stale: run `cuda-doctor rules --format markdown > docs/rules.md`"


# -- end to end, as real processes -------------------------------------------------------------


def doctor(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_doctor(args, cwd=cwd, env={**os.environ, **(env or {})})


def test_malformed_config_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[tool.cuda-doctor]\nseverity = { CD502 = "loud" }\n')
    proc = doctor(["check", "--facts", str(facts_file(tmp_path))], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert str(bad) in proc.stderr and "severity.CD502" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unreadable_facts_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"facts": {"values": ')
    proc = doctor(["check", "--facts", str(path)], cwd=tmp_path)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and str(path) in proc.stderr


def test_usage_error_exits_2(tmp_path: Path) -> None:
    proc = doctor(["check", "--format", "yaml"], cwd=tmp_path)
    assert proc.returncode == 2 and "Invalid value" in proc.stderr


@pytest.mark.parametrize(("mode", "fragment"), [("ok", "NVIDIA H200"), ("old", "470.82.01")])
def test_check_fast_end_to_end_with_fake_nvidia_smi(
    fake_nvidia_smi: Any, tmp_path: Path, mode: str, fragment: str
) -> None:
    env = dict(fake_nvidia_smi.ctx(mode).env)
    env["CUDA_DOCTOR_DISABLE_NVML"] = "1"  # force the nvidia-smi path whatever this host has
    proc = doctor(["check", "--fast", "--format", "json"], env=env, cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert report["facts"]["values"]["driver.source"] == "nvidia-smi"
    assert fragment in json.dumps(report["facts"]["values"])
    driver_rule = next(r for r in report["results"] if r["rule"] == "CD101")
    assert driver_rule["status"] == "pass"
    assert "torch.version" not in report["facts"]["values"]  # --fast imports no framework
    # healthy fake GPU: whatever else this host is, nothing about the GPU may fail
    gpu_failures = [
        r for r in report["results"] if r["status"] == "fail" and r["category"] in ("driver", "gpu", "health")
    ]
    assert gpu_failures == []
    assert proc.returncode == (1 if any(r["status"] == "fail" for r in report["results"]) else 0)


@pytest.mark.parametrize(
    ("mode", "status", "said"),
    [
        ("warn_before", "warn", "infoROM is corrupted"),  # the report is read, the warning shown
        ("truncated", "warn", "the GPU facts come from nvidia-smi --query-gpu"),  # and never "no driver"
        ("garbage_no_csv", "fail", "nvidia-smi answered, but neither its report could be read"),
    ],
)
def test_nvidia_smi_output_as_it_comes(fake_nvidia_smi: Any, tmp_path: Path, mode: str, status: str, said: str) -> None:
    env = {**fake_nvidia_smi.ctx(mode).env, "CUDA_DOCTOR_DISABLE_NVML": "1"}
    report = json.loads(doctor(["check", "--fast", "--format", "json"], env=env, cwd=tmp_path).stdout)
    cd101 = next(r for r in report["results"] if r["rule"] == "CD101")
    assert (cd101["status"], said in cd101["message"]) == (status, True), cd101["message"]
    assert "no NVIDIA driver" not in cd101["message"]


def test_json_valid_when_nothing_can_be_probed(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "CUDA_DOCTOR_DISABLE_NVML": "1"}
    proc = doctor(["check", "--fast", "--format", "json"], env=env, cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1
    cd101 = next(r for r in report["results"] if r["rule"] == "CD101")
    assert cd101["status"] == "fail"


def test_unknown_rule_names_are_refused(tmp_path: Path) -> None:
    proc = doctor(["check", "--facts", str(facts_file(tmp_path)), "--select", "CD999"], cwd=tmp_path)
    assert proc.returncode == 2 and "--select: no rule matches CD999" in proc.stderr


def test_config_naming_no_rule_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-doctor]\nignore = ["CD9999"]\n')
    proc = doctor(["check", "--facts", str(facts_file(tmp_path))], cwd=tmp_path)
    assert proc.returncode == 2 and "field 'ignore': no rule matches CD9999" in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--fast", "--timeout", "nan"],
        ["check", "--fast", "--smoke-timeout", "nan"],
        ["check", "--fast", "--image", ""],
        ["smoke", "--timeout", "nan"],
        ["smoke", "--smoke-timeout", "nan"],
    ],
)
def test_bad_option_values_are_usage_errors(tmp_path: Path, argv: list[str]) -> None:
    proc = doctor(argv, cwd=tmp_path)
    assert proc.returncode == 2 and "Invalid value" in proc.stderr and "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr


def test_probing_options_with_facts_are_refused(tmp_path: Path) -> None:
    proc = doctor(["check", "--facts", str(facts_file(tmp_path)), "--python", sys.executable], cwd=tmp_path)
    assert proc.returncode == 2 and "--python cannot be combined with --facts" in proc.stderr


def test_non_utf8_pyproject_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"\xe5\xff\x00[tool]")
    proc = doctor(["check", "--facts", str(facts_file(tmp_path))], cwd=tmp_path)
    assert proc.returncode == 2 and "not UTF-8" in proc.stderr and "internal error" not in proc.stderr


def test_save_path_blocked_by_a_file_keeps_the_checklist(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    proc = doctor(["check", "--facts", str(facts_file(tmp_path)), "--save", "t.py/x.json"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "ready to train" in proc.stdout  # the checklist was printed before the save failed
    assert "t.py is not a directory" in proc.stderr


def test_piped_json_is_one_line_and_saved_json_is_indented(tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    facts = str(facts_file(tmp_path))
    proc = doctor(["check", "--facts", facts, "--format", "json", "--save", str(saved)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1  # one line, as `gh` and `pip-audit` print JSON into a pipe
    text = saved.read_text(encoding="utf-8")
    assert text.startswith('{\n  "schema": "cuda-doctor/report"')
    assert json.loads(text) == json.loads(proc.stdout)


def test_json_on_a_terminal_is_indented() -> None:
    from cuda_doctor.core.config import Config
    from cuda_doctor.core.pipeline import rejudge
    from cuda_doctor.report.check import render

    report = rejudge(H200_FACTS, Config())
    assert render(report, "json", terminal=True).startswith('{\n  "schema"')
    assert "\n" not in render(report, "json", terminal=False).rstrip("\n")


@pytest.mark.slow
@pytest.mark.parametrize("venv_first_on_path", [False, True])
def test_fixes_install_into_the_interpreter_given_with_python(
    fake_nvidia_smi: Any, torch_cpu_python: Path, tmp_path: Path, venv_first_on_path: bool
) -> None:
    env = dict(fake_nvidia_smi.ctx().env)
    env["CUDA_DOCTOR_DISABLE_NVML"] = "1"  # the fake nvidia-smi's H200, whatever this host has
    if venv_first_on_path:  # then the `pip` a user types is that interpreter's own
        env["PATH"] = f"{torch_cpu_python.parent}{os.pathsep}{env['PATH']}"
    args = ["check", "--python", str(torch_cpu_python), "--no-smoke", "--format", "json"]
    report = json.loads(doctor(args, env=env, cwd=tmp_path).stdout)
    cd201 = next(r for r in report["results"] if r["rule"] == "CD201")
    assert cd201["status"] == "fail"  # a CPU-only torch 2.13 on the H200
    pip = "pip" if venv_first_on_path else f"{torch_cpu_python} -m pip"
    assert cd201["commands"] == [
        f"{pip} uninstall -y torch",
        f"{pip} install 'torch==2.13.0' --index-url https://download.pytorch.org/whl/cu130",
    ]


@pytest.mark.parametrize("other", ["--no-smoke", "--fast"])
def test_nccl_needs_the_gpu_run(tmp_path: Path, other: str) -> None:
    result = run("check", "--nccl", other, cwd=tmp_path)
    assert result.exit_code == 2
    assert f"--nccl runs work on the GPU: it cannot be combined with {other}" in result.output


def test_a_child_ending_on_its_own_is_waited_for_after_the_checklist_is_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cuda_doctor.base import children
    from cuda_doctor.commands import check as check_command
    from cuda_doctor.core.checkreport import Report
    from cuda_doctor.core.facts import Facts
    from cuda_doctor.core.probe import ProbeContext

    ending: list[children.Child] = []
    alive_when_printed: list[bool] = []
    slow_to_end = "import sys, time\nprint('{}', flush=True)\nsys.stdin.readline()\ntime.sleep(1)\n"

    def run_check(ctx: ProbeContext, config: object, **options: object) -> Report:
        child = children.Child(sys.executable, slow_to_end, env=dict(os.environ), timeout=600, stdin=True)
        assert child.wait_for(lambda record: True) is not None
        ctx.handoff.let_end(child, grace=30)  # as the last phase-2 probe leaves its child
        ending.append(child)
        return Report(facts=Facts(), results=[])

    real_render = check_command.render

    def render(report: Report, fmt: str, **options: Any) -> str:
        alive_when_printed.append(ending[0].poll() is None)
        return real_render(report, fmt, **options)

    monkeypatch.setattr(check_command, "run_check", run_check)
    monkeypatch.setattr(check_command, "render", render)
    result = run("check", "--format", "json", cwd=tmp_path)
    assert json.loads(result.output)["command"] == "check"
    assert alive_when_printed == [True]  # the checklist did not wait for the child's end
    ended = ending[0].result
    assert ended is not None and ended.returncode == 0 and not ended.timed_out  # the command did


@pytest.mark.usefixtures("no_home_folder")
def test_a_user_without_home_or_user_entry_is_still_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_doctor.base import tomlcache

    # the cache of parsed rules has no folder
    monkeypatch.setattr(tomlcache, "_memory", None)
    monkeypatch.setattr(tomlcache, "_dirty", True)
    result = CliRunner().invoke(cli, ["check", "--facts", str(facts_file(tmp_path)), "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert json.loads(result.output)["summary"]["exit_code"] == result.exit_code == 0

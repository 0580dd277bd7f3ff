"""``cuda_doctor.check`` and ``cuda_doctor.require`` in a process that stands for a machine with
H200s (the fake NVML), and what ``import cuda_doctor`` costs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cuda_doctor
from tests.api.fake_machine import REPO, h200_env, run_script

REQUIRE = """
import cuda_doctor
try:
    print("RETURNED", cuda_doctor.require())
except cuda_doctor.PreflightError as error:
    print("RAISED", error.headline)
    print(error)
"""


def test_require_returns_the_verdict_line_on_a_healthy_machine(tmp_path: Path) -> None:
    done = run_script(REQUIRE, tmp_path, h200_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RETURNED OK driver 580.159.04 (CUDA 13.0), 1x NVIDIA H200: ")
    assert "RAISED" not in done.stdout


def test_require_raises_with_the_checklist_when_cuda_visible_devices_names_a_missing_gpu(tmp_path: Path) -> None:
    done = run_script(REQUIRE, tmp_path, h200_env(tmp_path, CUDA_VISIBLE_DEVICES="7"))
    assert done.returncode == 0, done.stderr
    head, _, checklist = done.stdout.partition("\n")
    assert head.startswith("RAISED FAIL CD401 CUDA_VISIBLE_DEVICES=7: '7' names no GPU on this machine")
    assert "✗ CUDA_VISIBLE_DEVICES=7: '7' names no GPU on this machine" in checklist
    assert "$ export CUDA_VISIBLE_DEVICES=0" in checklist
    assert "findings at or above 'error' (exit 1)" in checklist
    assert "\x1b" not in checklist


def test_a_warning_stops_only_at_fail_on_warning(tmp_path: Path) -> None:
    script = """
import cuda_doctor
for level in ("error", "warning"):
    try:
        print(level, "RETURNED", cuda_doctor.require(fail_on=level, select="CD806"))
    except cuda_doctor.PreflightError as error:
        print(level, "RAISED", error.headline)
"""
    # eight GPUs without a fabric, two links down on one: CD806 warns (tests/commands/test_check_multigpu.py)
    env = h200_env(tmp_path, gpus=8, FAKE_PYNVML_NVLINKS_DOWN="5:4,5:9")
    done = run_script(script, tmp_path, env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("error RETURNED OK ") and "1 warning (CD806)" in lines[0]
    assert lines[1].startswith("warning RAISED FAIL CD806 ") and "GPU 5 has 16 of 18 links up" in lines[1]


def test_check_returns_the_report(tmp_path: Path) -> None:
    script = """
import json, cuda_doctor
report = cuda_doctor.check(fast=True)
cd401 = [r for r in report.results if r.rule_id == "CD401"][0]
print(json.dumps({
    "exit_code": report.exit_code, "ok": report.ok, "fail_on": report.fail_on, "summary": dict(report.summary),
    "driver": report.facts["driver.version"], "cd401": [cd401.status.value, cd401.message],
    "seconds": report.seconds, "headline": report.headline, "problems": list(report.problems),
    "schema": report.to_dict()["schema"], "json_exit": report.to_dict()["summary"]["exit_code"],
    "checklist_has_it": "CUDA_VISIBLE_DEVICES=3" in report.checklist(verbose=False),
    "result_type": type(cd401).__name__, "is_api_result": isinstance(cd401, cuda_doctor.Result),
}))
"""
    done = run_script(script, tmp_path, h200_env(tmp_path, gpus=2, CUDA_VISIBLE_DEVICES="3"))
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["exit_code"] == 1 and got["ok"] is False and got["fail_on"] == "error"
    assert got["summary"]["fail"] == 1 and got["summary"]["pass"] > 5
    assert got["driver"] == "580.159.04"
    assert got["cd401"][0] == "fail" and "'3' names no GPU" in got["cd401"][1]
    assert isinstance(got["seconds"], float) and got["seconds"] >= 0
    assert got["headline"].startswith("FAIL CD401 ")
    assert got["schema"] == "cuda-doctor/report" and got["json_exit"] == 1
    assert got["checklist_has_it"] is True
    assert got["result_type"] == "Result" and got["is_api_result"] is True


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("cuda_doctor.check(fast=True, python='/usr/bin/python3')", "python cannot be combined with fast"),
        ("cuda_doctor.require(fail_on='fatal')", "fail_on must be one of error, warning, info, not 'fatal'"),
        ("cuda_doctor.check(fast=True, select=['CD9999'])", "CD9999"),
        ("cuda_doctor.check(fast=True, timeout=float('nan'))", "timeout must be from 0.5 to 600 seconds, not nan"),
        ("cuda_doctor.check(smoke_timeout=float('inf'))", "smoke_timeout must be from 1 to 3600 seconds, not inf"),
        ("cuda_doctor.require(wait=-1)", "wait must be from 0 to 86400 seconds, not -1"),
        ("cuda_doctor.check(fast=True, config='missing.toml')", "missing.toml: no such file"),
        ("cuda_doctor.check(fast=True, select=[1])", "rule ids must be strings"),
    ],
)
def test_options_that_cannot_be_used_are_a_value_error(tmp_path: Path, call: str, message: str) -> None:
    script = f"""
import cuda_doctor
try:
    {call}
except ValueError as error:
    print("ValueError:", error)
"""
    done = run_script(script, tmp_path, h200_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ValueError:") and message in done.stdout


def test_the_configuration_of_the_project_applies_as_for_the_command(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pyproject.toml").write_text('[tool.cuda-doctor]\nignore = ["CD401"]\n', encoding="utf-8")
    done = run_script(REQUIRE, tmp_path, h200_env(tmp_path, CUDA_VISIBLE_DEVICES="7"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RETURNED OK ")


def test_the_public_names() -> None:
    assert set(cuda_doctor.__all__) == {
        "PreflightError",
        "Report",
        "Result",
        "Status",
        "__version__",
        "check",
        "require",
    }
    assert all(hasattr(cuda_doctor, name) for name in cuda_doctor.__all__)
    assert set(cuda_doctor.__all__) <= set(dir(cuda_doctor))
    assert issubclass(cuda_doctor.PreflightError, RuntimeError)
    with pytest.raises(AttributeError, match="no attribute 'requires'"):
        cuda_doctor.requires  # type: ignore[attr-defined]  # noqa: B018  # the access is what is tested


def loaded_after(statement: str) -> list[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60, check=True
    )
    return done.stdout.split()


def test_import_cuda_doctor_imports_nothing_else_of_its_own_nor_click_nor_rich() -> None:
    ours = [
        name for name in loaded_after("import cuda_doctor") if name.split(".")[0] in ("cuda_doctor", "click", "rich")
    ]
    assert ours == ["cuda_doctor"]
    assert "typing" not in loaded_after("import cuda_doctor") or "typing" in loaded_after("pass")


def test_a_lower_layer_imported_alone_does_not_load_the_api() -> None:
    loaded = loaded_after("import cuda_doctor.base.atomic, cuda_doctor.core.checkreport")
    assert "cuda_doctor.core.checkreport" in loaded and "cuda_doctor.api" not in loaded


def test_the_callbacks_are_not_imported_with_the_api() -> None:
    loaded = loaded_after("import cuda_doctor; cuda_doctor.check")
    assert "cuda_doctor.api" in loaded
    assert not [name for name in loaded if name.startswith(("cuda_doctor.integrations", "lightning", "transformers"))]

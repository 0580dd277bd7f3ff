"""The child-process runner: output parsing, the hard limit, the kill path, progress."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.smoke.probe import SmokeProbe
from cuda_doctor.smoke.runner import HANG_VARIABLE, parse_output, run_smoke


def test_parse_output_reads_steps_devices_and_result() -> None:
    text = "\n".join(
        [
            json.dumps({"step": "import torch"}),
            "Some library printed this line",
            json.dumps({"step": "matmul fp32 on GPU 0"}),
            json.dumps({"device": {"index": 0, "fp32_tflops": 51.0}}),
            "{not json",
            json.dumps({"result": {"status": "ok"}}),
            "",
        ]
    )
    parsed = parse_output(text)
    assert parsed.steps == ("import torch", "matmul fp32 on GPU 0")
    assert parsed.devices == ({"index": 0, "fp32_tflops": 51.0},)
    assert parsed.result == {"status": "ok"}
    assert not parsed.truncated


def test_parse_output_drops_a_line_cut_off_mid_write() -> None:
    text = json.dumps({"step": "matmul bf16 on GPU 0"}) + "\n" + '{"result": {"status": "o'
    parsed = parse_output(text)
    assert parsed.steps == ("matmul bf16 on GPU 0",)
    assert parsed.result is None
    assert parsed.truncated


def test_parse_output_of_nothing() -> None:
    parsed = parse_output("")
    assert parsed.steps == () and parsed.result is None and not parsed.truncated


def test_hang_in_driver_level_is_killed_and_names_the_step(
    clean_env: dict[str, str], fake_root: Path, python_without_torch: str
) -> None:
    env = {**clean_env, HANG_VARIABLE: "vector add"}
    seen: list[tuple[str, str]] = []
    ctx = ProbeContext(root=fake_root, env=env, smoke_timeout=2, python=python_without_torch)
    run = run_smoke(ctx, progress=lambda level, step: seen.append((level, step)))
    assert run.driver.timed_out
    assert run.driver.returncode == -9  # the whole group got SIGKILL
    assert run.driver.error == "killed after 2 s while running: vector add on GPU 0"
    # libcuda was found, so the framework level ran beside it (and found no torch).
    assert run.framework is not None and run.framework.result is not None
    assert run.framework.result["status"] == "no_torch"
    assert ("driver", "vector add on GPU 0") in seen
    assert ("framework", "import torch") in seen


def test_hang_before_the_driver_is_found_leaves_no_time(clean_env: dict[str, str], fake_root: Path) -> None:
    env = {**clean_env, HANG_VARIABLE: "load libcuda"}
    run = run_smoke(ProbeContext(root=fake_root, env=env, smoke_timeout=1.5))
    assert run.driver.error == "killed after 1.5 s while running: load libcuda"
    assert run.framework is None
    assert run.framework_skipped == "no time left of the 1.5 s smoke limit"


def test_hang_in_framework_level_is_killed_by_the_probe(
    clean_env: dict[str, str], fake_root: Path, python_without_torch: str
) -> None:
    env = {**clean_env, HANG_VARIABLE: "import torch"}
    ctx = ProbeContext(root=fake_root, env=env, smoke_timeout=3, python=python_without_torch)
    facts = SmokeProbe().collect(ctx)
    assert facts.get("smoke.driver_level.status") == "ok"
    assert facts.get("smoke.framework_level.status") == "timeout"
    assert facts.get("smoke.status") == "timeout"
    assert facts.get("smoke.error") == "killed after 3 s while running: import torch"
    assert facts.get("smoke.stopped_at") == "import torch"
    assert facts.get("smoke[0].vector_add_ok") is True  # the driver level's findings are kept


def test_child_that_cannot_start(clean_env: dict[str, str], tmp_path: Path) -> None:
    ctx = ProbeContext(root=tmp_path, env=clean_env, python=str(tmp_path / "no-such-python"))
    facts = SmokeProbe().collect(ctx)
    assert facts.get("smoke.status") == "failed"
    assert facts.get("smoke.driver_level.status") == "interpreter_failed"
    assert facts.get("smoke.driver_level.error") == (
        f"the interpreter {tmp_path / 'no-such-python'} could not run the smoke script: No such file or directory"
    )


def test_child_that_crashes_without_a_result(clean_env: dict[str, str], tmp_path: Path) -> None:
    python = tmp_path / "python-crash"
    python.write_text('#!/bin/sh\necho \'{"step": "load libcuda"}\'\necho "Segmentation fault" >&2\nexit 139\n')
    python.chmod(0o755)
    ctx = ProbeContext(root=tmp_path, env=clean_env, python=str(python))
    facts = SmokeProbe().collect(ctx)
    assert facts.get("smoke.status") == "failed"
    assert facts.get("smoke.driver_level.error") == (
        "the driver-level smoke child exited with status 139 while running: load libcuda: Segmentation fault"
    )


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("echo 'not a python' >&2; exit 1", "exited with status 1 before any progress line; stderr: not a python"),
        ("echo hi", "exited with status 0 before any progress line, printing 'hi'"),
    ],
)
def test_interpreter_that_cannot_run_the_script_is_not_blamed_on_the_driver(
    clean_env: dict[str, str], fake_root: Path, tmp_path: Path, body: str, said: str
) -> None:
    python = _script(tmp_path, "fakepy", body)
    facts = SmokeProbe().collect(ProbeContext(root=fake_root, env=clean_env, python=python))
    assert facts.get("smoke.status") == "failed"
    assert facts.get("smoke.driver_level.status") == "interpreter_failed"
    assert facts.get("smoke.interpreter_error") == f"the interpreter {python} could not run the smoke script: it {said}"
    # The framework level is not tried with an interpreter that cannot run a script.
    assert facts.get("smoke.framework_level.status") == "skipped"


def test_interpreter_that_hangs_before_any_line_is_not_a_driver_hang(
    clean_env: dict[str, str], fake_root: Path, tmp_path: Path
) -> None:
    python = _script(tmp_path, "slowpy", "exec sleep 30")
    ctx = ProbeContext(root=fake_root, env=clean_env, python=python, smoke_timeout=1)
    facts = SmokeProbe().collect(ctx)
    assert facts.get("smoke.driver_level.status") == "interpreter_failed"
    assert facts.get("smoke.status") == "failed"
    assert facts.get("smoke.interpreter_error") == (
        f"the interpreter {python} could not run the smoke script: it printed nothing in 1 s and was killed"
    )


def test_no_driver_fails_the_smoke_run(clean_env: dict[str, str], tmp_path: Path) -> None:
    # An empty root holds no libcuda.so.1: the run could not happen, which is not a pass.
    root = tmp_path / "root"
    root.mkdir()
    facts = SmokeProbe().collect(ProbeContext(root=root, env=clean_env, python=sys.executable))
    assert facts.get("smoke.driver_level.status") == "no_driver"
    assert facts.get("smoke.status") == "failed"
    assert facts.get("smoke.error") == "no NVIDIA driver: libcuda.so.1 not found — the GPU smoke run could not run"

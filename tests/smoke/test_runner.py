"""The smoke runner: output parsing, the hard limit, the kill path, progress, the torch child handed over."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cuda_doctor.base import children
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import collect
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.probe import FrameworkProbe
from cuda_doctor.smoke.probe import SmokeProbe
from cuda_doctor.smoke.runner import HANG_VARIABLE, cuda_start_error, parse_output, result_run, run_smoke
from tests.conftest import gone, wait_until


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


# -- one torch child per check: the framework probe's child runs the smoke steps ------------------------
def _counted(tmp_path: Path, python: str) -> tuple[str, Path]:
    """An interpreter that logs its pid once per start, then becomes ``python``."""
    log = tmp_path / "starts.log"
    wrapper = tmp_path / "counted-python"
    wrapper.write_text(f'#!/bin/sh\necho $$ >> {log}\nexec {python} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), log


def _starts(log: Path) -> list[int]:
    return [int(pid) for pid in log.read_text().split()] if log.exists() else []


def _check(ctx: ProbeContext, framework: FrameworkProbe | None = None) -> Facts:
    """The framework probe in phase 1, the smoke probe in phase 2, in one run as `check` does."""
    with ctx.handoff.open():
        facts = collect(ctx, [framework or FrameworkProbe()])
        facts.merge(collect(ctx, [SmokeProbe()]))
    return facts


def test_the_framework_probes_child_runs_the_smoke_steps(
    clean_env: dict[str, str], fake_root: Path, python_without_torch: str, tmp_path: Path
) -> None:
    python, log = _counted(tmp_path, python_without_torch)
    steps: list[tuple[str, str]] = []
    ctx = ProbeContext(root=fake_root, env=clean_env, python=python, step_progress=lambda *s: steps.append(s))
    facts = _check(ctx)
    assert facts.get("torch.installed") is False
    assert facts.get("smoke.driver_level.status") == "ok"
    assert facts.get("smoke.framework_level.status") == "skipped"
    assert facts.get("smoke.framework_level.error") == (
        f"torch is not installed for {python} (ModuleNotFoundError: No module named 'torch')"
    )
    assert ("smoke, framework level", "import torch") in steps
    assert len(_starts(log)) == 2  # the framework probe's child and the driver-level child, no third
    assert wait_until(lambda: all(gone(pid) for pid in _starts(log)))


@pytest.mark.slow
def test_one_torch_import_for_facts_and_smoke(
    clean_env: dict[str, str], fake_root: Path, torch_cpu_python: Path, tmp_path: Path
) -> None:
    python, log = _counted(tmp_path, str(torch_cpu_python))
    facts = _check(ProbeContext(root=fake_root, env=clean_env, python=python))
    assert facts.get("torch.version") == "2.13.0+cpu"
    assert facts.get("torch.import_error") is None
    assert facts.get("smoke.framework_level.torch_version") == "2.13.0+cpu"
    assert facts.get("smoke.framework_level.status") == "failed"
    error = facts.get("smoke.framework_level.error")
    assert error == "torch.cuda.is_available() is False: this torch is a CPU-only build"
    assert len(_starts(log)) == 2


def test_a_hang_at_a_step_of_the_handed_over_child_is_killed_and_named(
    clean_env: dict[str, str], fake_root: Path, python_without_torch: str
) -> None:
    env = {**clean_env, HANG_VARIABLE: "import torch"}
    facts = _check(ProbeContext(root=fake_root, env=env, smoke_timeout=3, python=python_without_torch))
    assert facts.get("torch.installed") is False  # phase 1 answered; the hang is in the smoke steps
    assert facts.get("smoke.status") == "timeout"
    assert facts.get("smoke.error") == "killed after 3 s while running: import torch"
    assert facts.get("smoke[0].vector_add_ok") is True


def test_an_interpreter_that_never_starts_gets_no_smoke_run(
    clean_env: dict[str, str], fake_root: Path, tmp_path: Path
) -> None:
    python, log = _counted(tmp_path, _script(tmp_path, "slowpy", "exec sleep 600"))
    framework = FrameworkProbe(min_start_timeout=0.5)
    facts = _check(ProbeContext(root=fake_root, env=clean_env, python=python, timeout=0.5), framework)
    assert facts.reason("torch.installed") == (
        f"{python} did not start the framework probe within 0.5 s (it printed nothing; is it a working Python?)"
    )
    error = (
        f"the interpreter {python} could not run the framework probe: it printed nothing in 0.5 s and was killed;"
        " the smoke run was skipped"
    )
    assert facts.get("smoke.status") == "failed"
    assert facts.get("smoke.interpreter_error") == error
    assert facts.get("smoke.driver_level.status") == "interpreter_failed"  # the driver is not blamed
    assert facts.get("smoke.framework_level.status") == "skipped"
    assert len(_starts(log)) == 1  # the smoke run started nothing


def test_output_quoted_from_a_child_is_capped(clean_env: dict[str, str], fake_root: Path) -> None:
    # /bin/ls "runs" the probe's source as a file name: its error quotes all of it on one line.
    facts = _check(ProbeContext(root=fake_root, env=clean_env, python="/bin/ls"))
    reason = facts.reason("torch.installed") or ""
    assert reason.startswith("/bin/ls exited with status 2: /bin/ls: cannot access") and len(reason) < 500
    error = str(facts.get("smoke.interpreter_error"))
    assert error.startswith("the interpreter /bin/ls could not run the framework probe: it exited with status 2")
    assert error.endswith("; the smoke run was skipped")
    assert "more characters)" in error and len(error) < 1000  # not the 15 KB of source ls quoted


def test_a_child_left_waiting_is_stopped_when_no_smoke_probe_takes_it(
    clean_env: dict[str, str], python_without_torch: str, tmp_path: Path
) -> None:
    python, log = _counted(tmp_path, python_without_torch)
    ctx = ProbeContext(env=clean_env, python=python)
    with ctx.handoff.open():
        facts = collect(ctx, [FrameworkProbe()])
        (pid,) = _starts(log)
        assert not gone(pid)  # waiting for the smoke steps
    assert facts.get("torch.installed") is False
    assert wait_until(lambda: gone(pid))


def test_no_driver_releases_the_torch_child_unused(
    clean_env: dict[str, str], python_without_torch: str, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    python, log = _counted(tmp_path, python_without_torch)
    facts = _check(ProbeContext(root=root, env=clean_env, python=python))
    assert facts.get("smoke.driver_level.status") == "no_driver"
    assert facts.get("smoke.framework_level.error") == "no NVIDIA driver to run on (libcuda.so.1 not found)"
    assert wait_until(lambda: all(gone(pid) for pid in _starts(log)))


def test_a_childs_result_is_read_before_it_ends(clean_env: dict[str, str]) -> None:
    body = (
        "import json, sys, time\n"
        "print(json.dumps({'started': True}), flush=True)\n"
        "print(json.dumps({'step': 'matmul bf16 on GPU 0'}), flush=True)\n"
        "print(json.dumps({'result': {'status': 'ok'}}), flush=True)\n"
        "sys.stdin.readline()\n"
        "time.sleep(2)  # its contexts torn down\n"
    )
    child = children.Child(sys.executable, body, env=clean_env, timeout=600, stdin=True)
    run = result_run("framework", child)
    assert run is not None and run.result == {"status": "ok"} and run.last_step == "matmul bf16 on GPU 0"
    assert run.error is None and child.poll() is None  # still running: its end is someone else's wait
    child.stop()
    quiet = children.Child(sys.executable, "print('no records')", env=clean_env, timeout=600)
    assert result_run("framework", quiet) is None  # its output ended without one: how it ended says why
    assert quiet.finish().returncode == 0


def test_a_failure_said_before_a_crash_is_the_error(clean_env: dict[str, str], tmp_path: Path) -> None:
    """On an H200 the child died of SIGSEGV after torch had raised, and all the checklist said was the status."""
    said = json.dumps({"failure": {"step": "load libcuda", "error": "ValueError: Unrecognized key x"}})
    python = _script(tmp_path, "python-crash", f"echo '{{\"step\": \"load libcuda\"}}'\necho '{said}'\nkill -SEGV $$")
    facts = SmokeProbe().collect(ProbeContext(root=tmp_path, env=clean_env, python=python))
    assert facts.get("smoke.driver_level.error") == (
        "load libcuda failed: ValueError: Unrecognized key x (then the driver-level smoke child was killed by"
        " signal SIGSEGV (status -11) while running: load libcuda)"
    )


def test_cuda_that_failed_to_start_in_the_framework_probe_is_not_started_again() -> None:
    payload = {
        "values": {"torch.device_count": 1},
        "unknown": {"torch.device_capabilities": "ValueError: Unrecognized key 'x' in CUDA allocator config."},
    }
    assert cuda_start_error(payload) == "ValueError: Unrecognized key 'x' in CUDA allocator config."
    assert cuda_start_error({"values": {"torch.device_count": 0}, "unknown": {}}) is None
    assert cuda_start_error({"values": {"torch.device_count": 1}, "unknown": {}}) is None
    assert cuda_start_error(None) is None

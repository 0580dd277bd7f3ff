"""The framework probe, run against real interpreters and real misbehaving executables."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.base import children
from cuda_doctor.base.childside.report import STARTED
from cuda_doctor.base.process import CommandResult
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework import _child as child
from cuda_doctor.framework.probe import (
    ALL_FACTS,
    FRAMEWORK_FACTS,
    PROBE,
    FrameworkProbe,
    find_payload,
    interpret,
    pip_command,
    shape,
)

MakeExe = Callable[[str, str], Path]


def _all_unknown(facts: Facts) -> None:
    assert facts.values == {}
    # the child's facts, and the fatbin scan's where the probe ran (not through interpret() alone)
    assert set(FRAMEWORK_FACTS) <= set(facts.unknown) <= set(ALL_FACTS)


# -- the probe's switches -------------------------------------------------------------------
def test_probe_identity_and_fast_mode() -> None:
    assert PROBE.name == "framework"
    assert PROBE.applies(ProbeContext(fast=False))
    assert not PROBE.applies(ProbeContext(fast=True))


def test_timeout_never_below_the_floor() -> None:
    assert PROBE.timeout(ProbeContext(timeout=5)) == 60
    assert PROBE.timeout(ProbeContext(timeout=120)) == 120
    assert FrameworkProbe(min_timeout=0.5).timeout(ProbeContext(timeout=0.2)) == 0.5


# -- real interpreters ----------------------------------------------------------------------
@pytest.mark.slow
def test_real_cpu_only_torch(torch_cpu_python: Path, base_env: dict[str, str]) -> None:
    facts = PROBE.collect(ProbeContext(python=str(torch_cpu_python), env=base_env))
    v = facts.values
    assert v["torch.installed"] is True
    assert v["torch.version"] == "2.13.0+cpu"
    assert v["torch.version_base"] == "2.13.0"
    assert v["torch.cuda_build"] is None  # the CPU wheel on a GPU machine: the classic mistake
    assert v["torch.hip_build"] is None
    assert v["torch.cuda_available"] is False
    assert v["torch.cuda_error"] is None  # a CPU build has nothing to warn about
    assert v["torch.device_count"] == 0
    assert v["torch.arch_list"] == []  # no CUDA kernels compiled in at all
    assert v["torch.device_capabilities"] == []
    assert v["torch.device_names"] == []
    assert v["torch.bf16_native"] is False
    assert v["torch.cudnn_version"] is None
    assert v["torch.nccl_version"] is None
    assert isinstance(v["torch.import_seconds"], float) and v["torch.import_seconds"] > 0
    assert Path(v["framework.python"]).parent == torch_cpu_python.parent
    assert v["framework.python_version"].count(".") == 2
    assert v["tensorflow.installed"] is False
    assert "tensorflow is not installed" in facts.unknown["tensorflow.version"]
    # every framework fact is accounted for, known or with a reason
    assert set(FRAMEWORK_FACTS) <= set(v) | set(facts.unknown)


def test_interpreter_without_torch(plain_python: Path, base_env: dict[str, str]) -> None:
    facts = PROBE.collect(ProbeContext(python=str(plain_python), env=base_env))
    assert facts.values["torch.installed"] is False
    assert facts.values["tensorflow.installed"] is False
    assert facts.values["framework.python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert "torch is not installed in" in facts.unknown["torch.cuda_build"]
    assert "torch.cuda_build" not in facts.values  # not "CPU-only": simply absent


def test_env_reaches_the_child(plain_python: Path, tmp_path: Path, base_env: dict[str, str]) -> None:
    # A fake torch package on PYTHONPATH proves the child sees ctx.env, not our environment.
    pkg = tmp_path / "site" / "torch"
    (pkg / "version").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "__version__ = '2.4.1+cu121'\nfrom torch import _C, version, cuda, backends\n",
        encoding="utf-8",
    )
    (pkg / "version" / "__init__.py").write_text("cuda = '12.1'\nhip = None\n", encoding="utf-8")
    (pkg / "cuda.py").write_text(
        "import warnings\n"
        "def is_available():\n"
        "    warnings.warn('CUDA initialization: The NVIDIA driver on your system is too old"
        " (found version 11040).')\n"
        "    return False\n"
        "def get_arch_list():\n"
        "    return []\n",
        encoding="utf-8",
    )
    (pkg / "backends.py").write_text(
        "class cudnn:\n    @staticmethod\n    def version():\n        return 90100\n",
        encoding="utf-8",
    )
    (pkg / "_C.py").write_text("def _cuda_getArchFlags():\n    return 'sm_50 sm_80 sm_90'\n")
    env = {**base_env, "PYTHONPATH": str(tmp_path / "site")}
    facts = PROBE.collect(ProbeContext(python=str(plain_python), env=env))
    v = facts.values
    assert v["torch.version_base"] == "2.4.1"
    assert v["torch.cuda_build"] == "12.1"
    assert v["torch.cuda_available"] is False
    assert "driver on your system is too old" in v["torch.cuda_error"]
    assert v["torch.arch_list"] == ["sm_50", "sm_80", "sm_90"]  # read even though unavailable
    assert v["torch.cudnn_version"] == 90100
    # torch.cuda.nccl does not exist in this fake: the step fails alone, with its reason
    assert "ModuleNotFoundError" in facts.unknown["torch.nccl_version"]
    assert v["torch.device_count"] == 0


# -- interpreters that fail -----------------------------------------------------------------
def test_missing_interpreter(tmp_path: Path, base_env: dict[str, str]) -> None:
    missing = tmp_path / "nowhere" / "python3.9"
    facts = PROBE.collect(ProbeContext(python=str(missing), env=base_env))
    _all_unknown(facts)
    assert str(missing) in facts.unknown["torch.installed"]
    assert "No such file" in facts.unknown["torch.installed"]


def test_interpreter_that_never_starts_is_not_given_the_import_floor(
    make_executable: MakeExe, base_env: dict[str, str]
) -> None:
    # The 60 s floor is for a real `import torch`; one that prints nothing is dropped early.
    python = make_executable("python", "exec sleep 30")
    probe = FrameworkProbe(min_start_timeout=0.5)
    facts = probe.collect(ProbeContext(python=str(python), env=base_env, timeout=0.5))
    _all_unknown(facts)
    assert facts.unknown["torch.version"] == (
        f"{python} did not start the framework probe within 0.5 s (it printed nothing; is it a working Python?)"
    )


def test_start_timeout_follows_the_timeout_option() -> None:
    assert PROBE.start_timeout(ProbeContext(timeout=0.5)) == 5
    assert PROBE.start_timeout(ProbeContext(timeout=20)) == 20
    assert FrameworkProbe(min_timeout=2).start_timeout(ProbeContext(timeout=0.5)) == 2


def test_started_child_gets_the_whole_floor_for_its_import(make_executable: MakeExe, base_env: dict[str, str]) -> None:
    report = json.dumps({"values": {"torch.installed": False}, "unknown": {}})
    body = f"echo '{STARTED}'; sleep 1; echo '{report}'"
    python = make_executable("python", body)
    probe = FrameworkProbe(min_start_timeout=0.2, min_timeout=30)
    facts = probe.collect(ProbeContext(python=str(python), env=base_env, timeout=0.2))
    assert facts.values["torch.installed"] is False


def test_started_child_that_hangs(make_executable: MakeExe, base_env: dict[str, str]) -> None:
    python = make_executable("python", f"echo '{STARTED}'; exec sleep 30")
    probe = FrameworkProbe(min_timeout=1, min_start_timeout=0.5)
    facts = probe.collect(ProbeContext(python=str(python), env=base_env, timeout=0.5))
    _all_unknown(facts)
    assert facts.unknown["torch.version"] == f"{python} did not answer in 1 s"


def test_real_child_prints_started_first(plain_python: Path, base_env: dict[str, str]) -> None:
    source = Path(child.__file__).read_text(encoding="utf-8")
    result = subprocess.run([str(plain_python), "-c", source], env=base_env, capture_output=True, text=True, timeout=60)
    lines = result.stdout.splitlines()
    assert lines[0] == STARTED
    assert find_payload(result.stdout) is not None and "values" in json.loads(lines[-1])


def test_crashing_interpreter(make_executable: MakeExe, base_env: dict[str, str]) -> None:
    message = "ImportError: libcudart.so.13: cannot open shared object file"
    python = make_executable("python", f"echo 'noise'; echo '{message}' >&2; exit 1")
    facts = PROBE.collect(ProbeContext(python=str(python), env=base_env))
    _all_unknown(facts)
    assert facts.unknown["torch.cuda_available"] == f"{python} exited with status 1: {message}"


def test_interpreter_killed_by_a_signal(make_executable: MakeExe, base_env: dict[str, str]) -> None:
    python = make_executable("python", "kill -SEGV $$")
    facts = PROBE.collect(ProbeContext(python=str(python), env=base_env))
    _all_unknown(facts)
    assert facts.unknown["torch.installed"].startswith(f"{python} exited with signal SIGSEGV")


def test_interpreter_printing_garbage(make_executable: MakeExe, base_env: dict[str, str]) -> None:
    python = make_executable("python", "echo 'Python 2.7.18'; echo '{not json'")
    facts = PROBE.collect(ProbeContext(python=str(python), env=base_env))
    _all_unknown(facts)
    reason = facts.unknown["framework.python"]
    assert reason.startswith(f"{python} printed no JSON report")
    assert "Python 2.7.18" in reason


def test_interpreter_printing_nothing(make_executable: MakeExe, base_env: dict[str, str]) -> None:
    python = make_executable("python", "exit 0")
    facts = PROBE.collect(ProbeContext(python=str(python), env=base_env))
    _all_unknown(facts)
    assert facts.unknown["torch.installed"] == f"{python} printed no JSON report (empty output)"


# -- shaping the child's report ---------------------------------------------------------------
def _result(stdout: str, returncode: int = 0) -> CommandResult:
    return CommandResult(("python", "-c", "..."), returncode, stdout, "", 0.1)


def test_payload_is_the_last_json_line() -> None:
    stdout = 'noise from a sitecustomize\n{"values": {"torch.installed": true}, "unknown": {}}\n'
    assert find_payload(stdout) == {"values": {"torch.installed": True}, "unknown": {}}
    assert find_payload("[1, 2]\n") is None
    assert find_payload("{broken\n") is None


def test_shape_keeps_framework_facts_and_names_the_missing() -> None:
    payload = {
        "values": {"torch.installed": True, "torch.version": "2.11.0+cu130", "driver.version": "1"},
        "unknown": {"torch.nccl_version": "AttributeError: no _nccl_version", "gpu.count": "x"},
    }
    facts = shape(payload, "/usr/bin/python3")
    assert facts.values == {"torch.installed": True, "torch.version": "2.11.0+cu130"}
    assert facts.unknown["torch.nccl_version"] == "AttributeError: no _nccl_version"
    assert "gpu.count" not in facts.unknown and "driver.version" not in facts.values
    assert facts.unknown["torch.arch_list"] == "/usr/bin/python3 did not report it"
    assert set(facts.values) | set(facts.unknown) == set(FRAMEWORK_FACTS)


def test_shape_rejects_a_malformed_report() -> None:
    facts = interpret(_result(json.dumps({"values": []})), "/py", 60)
    _all_unknown(facts)
    assert "without 'values' and 'unknown'" in facts.unknown["torch.installed"]


def test_report_after_a_crash_at_exit_is_still_used() -> None:
    stdout = json.dumps({"values": {"torch.installed": False}, "unknown": {}})
    facts = interpret(_result(stdout, returncode=-11), "/py", 60)
    assert facts.values["torch.installed"] is False


def test_child_is_self_contained_and_old_python_syntax() -> None:
    # The inspected interpreter may be older than ours and has no cuda_doctor installed: what
    # runs there is the child composed with its child-side helpers.
    source = children.compose(Path(child.__file__))
    tree = ast.parse(source, feature_version=(3, 8))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert "cuda_doctor" not in imported
    assert imported <= set(sys.stdlib_module_names) | {"torch", "tensorflow", "__future__"}
    # the file itself names its helpers the only way compose() resolves
    raw = Path(child.__file__).read_text(encoding="utf-8")
    assert [line.split()[1] for line in raw.splitlines() if line.startswith("from cuda_doctor")] == [
        "cuda_doctor.base.childside.allocator",
        "cuda_doctor.base.childside.loaded",
        "cuda_doctor.base.childside.packages",
        "cuda_doctor.base.childside.report",
    ]


# -- the child's pure helpers ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [("2.11.0+cu130", "2.11.0"), ("2.13.0+cpu", "2.13.0"), ("2.6.0a0+git1d2e3f", "2.6.0a0"), ("1.13.1", "1.13.1")],
)
def test_version_base(given: str, expected: str) -> None:
    assert child.version_base(given) == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [((2, 28, 9), "2.28.9"), ([2, 18, 1], "2.18.1"), (21803, "2.18.3"), (2708, "2.7.8"), (None, None)],
)
def test_nccl_text(given: object, expected: str | None) -> None:
    assert child.nccl_text(given) == expected


def test_bf16_native_needs_ampere() -> None:
    assert child.bf16_native(["9.0"]) is True
    assert child.bf16_native(["7.5", "8.0"]) is True
    assert child.bf16_native(["7.0", "7.5"]) is False  # V100/T4 only emulate bf16
    assert child.bf16_native([]) is False


def test_arch_list_from_flags() -> None:
    assert child.arch_list_from_flags("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120") == [
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_90",
        "sm_100",
        "sm_120",
    ]
    assert child.arch_list_from_flags("") == []
    assert child.arch_list_from_flags(None) == []


def test_warning_text_joins_distinct_messages() -> None:
    error_101 = "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error 101: invalid device ordinal"
    caught = [UserWarning(error_101), UserWarning(error_101), UserWarning("second")]
    assert child.warning_text(caught) == error_101 + "\nsecond"
    assert child.warning_text([]) is None


def test_a_failing_step_marks_only_its_facts() -> None:
    report = child.new_report()

    def boom() -> None:
        raise RuntimeError("No CUDA GPUs are available\nmore detail")

    child.attempt(report, ["torch.device_count", "torch.device_names"], boom)
    assert report == {
        "values": {},
        "unknown": {
            "torch.device_count": "RuntimeError: No CUDA GPUs are available",
            "torch.device_names": "RuntimeError: No CUDA GPUs are available",
        },
    }


# -- reports recorded on a real H200 ---------------------------------------------------------
def _h200_reports() -> dict[str, dict[str, dict[str, object]]]:
    path = Path(__file__).parents[1] / "fixtures" / "env" / "h200-framework-facts.json"
    reports: dict[str, dict[str, dict[str, object]]] = json.loads(path.read_text())["reports"]
    return reports


@pytest.mark.parametrize("visible", ["unset", "", "0,0", "GPU-nonexistent"])
def test_recorded_h200_reports_shape_unchanged(visible: str) -> None:
    report = _h200_reports()[visible]
    facts = interpret(_result("warning on stdout\n" + json.dumps(report)), "/py", 60)
    recorded = Facts.from_dict(report)
    assert facts.values == recorded.values
    # what that child did not report yet (the distributions and loaded libraries) is unknown, saying so
    newer = {name: reason for name, reason in facts.unknown.items() if name not in recorded.unknown}
    expected = [name for name in FRAMEWORK_FACTS if name not in recorded.values and name not in recorded.unknown]
    assert newer == dict.fromkeys(expected, "/py did not report it")
    assert {n: r for n, r in facts.unknown.items() if n in recorded.unknown} == recorded.unknown


@pytest.mark.parametrize(
    ("raised", "recorded"),
    [
        ("ImportError('libcudart.so.13: cannot open shared object file')", "ImportError: libcudart.so.13: cannot open"),
        ("OSError('[WinError 126] loading c10.dll\\nError loading the last dependency')", "OSError: Error loading the"),
    ],
)
def test_a_failing_import_is_recorded_with_its_last_line(
    plain_python: Path, tmp_path: Path, base_env: dict[str, str], raised: str, recorded: str
) -> None:
    pkg = tmp_path / "site" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"raise {raised}\n", encoding="utf-8")
    env = {**base_env, "PYTHONPATH": str(tmp_path / "site")}
    facts = PROBE.collect(ProbeContext(python=str(plain_python), env=env))
    assert facts.values["torch.installed"] is True
    assert str(facts.values["torch.import_error"]).startswith(recorded)  # a fact, not "torch None"
    assert facts.unknown["torch.version"].startswith("import torch failed: ")


def test_the_probe_on_its_own_leaves_no_child(plain_python: Path, base_env: dict[str, str]) -> None:
    ctx = ProbeContext(python=str(plain_python), env=base_env)  # smoke on, but no pipeline run
    assert not ctx.handoff.accepting
    PROBE.collect(ctx)
    assert ctx.handoff.take("torch") is None


# -- how fixes run pip ------------------------------------------------------------------------
def _venv(root: Path, pip_names: str | None = None) -> Path:
    """A venv layout: bin/python (a link to this interpreter) and bin/pip whose #! line names
    ``pip_names`` (bin/python3.11 linked to bin/python by default)."""
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    python = bindir / "python"
    python.symlink_to(sys.executable)
    (bindir / "python3.11").symlink_to(python)
    pip = bindir / "pip"
    pip.write_text(f"#!{pip_names or bindir / 'python3.11'}\nimport sys\n", encoding="utf-8")
    pip.chmod(0o755)
    return python


def test_plain_pip_only_when_the_pip_on_path_is_the_interpreters_own(tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    assert pip_command(str(python), f"{python.parent}{os.pathsep}/usr/bin") == "pip"
    # the same interpreter, but another pip first on PATH
    other = _venv(tmp_path / "other")
    assert pip_command(str(python), f"{other.parent}{os.pathsep}{python.parent}") == f"{python} -m pip"
    # no pip on PATH at all
    assert pip_command(str(python), str(tmp_path / "empty")) == f"{python} -m pip"


def test_a_pip_next_to_the_interpreter_for_another_python_is_not_its_own(tmp_path: Path) -> None:
    bindir = tmp_path / "usr" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python3.12").write_bytes(b"")  # another file than the interpreter
    python = bindir / "python3"
    python.symlink_to(sys.executable)
    pip = bindir / "pip"
    pip.write_text(f"#!{bindir / 'python3.12'}\n", encoding="utf-8")
    pip.chmod(0o755)
    assert pip_command(str(python), str(bindir)) == f"{python} -m pip"


def test_a_pip_started_through_env_or_a_shell_is_not_trusted(tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv", pip_names="/usr/bin/env python3")
    assert pip_command(str(python), str(python.parent)) == f"{python} -m pip"


def test_the_interpreter_is_named_so_that_the_command_runs_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = _venv(tmp_path / "my venv")
    quoted = shlex.quote(str(python))
    # a space in the path: quoted (and a #! line with a space names no interpreter)
    assert pip_command(str(python), str(python.parent)) == f"{quoted} -m pip"
    # a bare name is the one PATH finds; a relative path is made absolute, links are kept
    plain = _venv(tmp_path / "venv")
    assert pip_command("python3.11", f"{plain.parent}{os.pathsep}/usr/bin") == "pip"
    assert pip_command("python3.11", f"/nowhere{os.pathsep}{plain.parent}") == "pip"
    monkeypatch.chdir(tmp_path)
    assert pip_command("my venv/bin/python", "/nowhere") == f"{quoted} -m pip"

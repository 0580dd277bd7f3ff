"""The Slurm hooks without a cluster: what is decided for each verdict and node state, how the
node's state is read (a stand-in ``sinfo`` executable), and the check run under its budget."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_doctor.slurm.health import Outcome, decide, node_name, run_check
from cuda_doctor.slurm.node import REASON_PREFIX, NodeState, Slurm
from cuda_doctor.slurm.scripts import hook_script

REPO = Path(__file__).resolve().parents[2]
FAIL = Outcome("FAIL", "FAIL CD101 the NVIDIA kernel driver is not loaded")
OK = Outcome("OK", "OK driver 580.159.04 (CUDA 13.0), 1x NVIDIA H200: 6 checks passed")
UNKNOWN = Outcome("UNKNOWN", "UNKNOWN cuda-doctor check did not finish in 40 s")
OURS = REASON_PREFIX + "FAIL CD601 GPU 3: 2 uncorrectable ECC errors"


@pytest.mark.parametrize(
    ("outcome", "state", "reason", "kind"),
    [
        (FAIL, "idle", "", "drain"),
        (FAIL, "mixed", "", "drain"),
        (FAIL, "drained", OURS, "drain"),  # drained by cuda-doctor for something else: the reason follows
        (FAIL, "drained", REASON_PREFIX + FAIL.line, "none"),  # already drained for this
        (FAIL, "drained", "replacing a fan", "none"),  # an administrator's drain is never taken over
        (FAIL, "draining", "Prolog error", "none"),
        (OK, "drained", OURS, "undrain"),
        (OK, "draining", OURS, "undrain"),
        (OK, "drained", "replacing a fan", "none"),
        (OK, "drained", "", "none"),
        (OK, "idle", "", "none"),
        (OK, "down", OURS, "none"),  # down, not drained: not cuda-doctor's to lift
        (UNKNOWN, "drained", OURS, "none"),
        (UNKNOWN, "idle", "", "none"),
    ],
)
def test_decide(outcome: Outcome, state: str, reason: str, kind: str) -> None:
    action = decide(outcome, NodeState("gpu-017", state, reason))
    assert action.kind == kind, action.why
    if kind == "drain":
        assert action.reason == REASON_PREFIX + outcome.line


def test_an_administrators_reason_is_shown_as_text_only() -> None:
    action = decide(FAIL, NodeState("n", "drained", "fan\x1b[2J"))
    assert action.kind == "none" and "\\x1b[2J" in action.why and "\x1b" not in action.why


def test_node_name() -> None:
    assert node_name("given", {"SLURMD_NODENAME": "slurmd"}) == "given"
    assert node_name(None, {"SLURMD_NODENAME": "slurmd"}) == "slurmd"
    assert node_name(None, {}) == os.uname().nodename.split(".")[0]


def fake_sinfo(tmp_path: Path, output: str, status: int = 0) -> Slurm:
    """A Slurm whose ``sinfo`` prints ``output``; the arguments it got go to args.txt."""
    exe = tmp_path / "sinfo"
    exe.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/args.txt"\nprintf %s \'{output}\'\nexit {status}\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return Slurm(env={"PATH": str(tmp_path)})


def test_reading_a_drained_node(tmp_path: Path) -> None:
    slurm = fake_sinfo(tmp_path, f"drained*|{OURS}\ndrained*|{OURS}\n")  # the node is in two partitions
    state = slurm.node("gpu-017")
    assert state == NodeState("gpu-017", "drained", OURS)
    assert isinstance(state, NodeState) and state.drained_by_us
    assert "--nodes=gpu-017" in (tmp_path / "args.txt").read_text()


def test_a_reason_with_the_separator_in_it(tmp_path: Path) -> None:
    state = fake_sinfo(tmp_path, "draining|disk a|b full\n").node("n")
    assert state == NodeState("n", "draining", "disk a|b full")


def test_no_reason_is_none(tmp_path: Path) -> None:
    state = fake_sinfo(tmp_path, "idle|none\n").node("n")
    assert isinstance(state, NodeState) and state.reason == "" and not state.drained


def test_an_unknown_node_and_a_failing_sinfo_say_so(tmp_path: Path) -> None:
    assert fake_sinfo(tmp_path, "").node("gpu-999") == "Slurm does not know a node named gpu-999 (set it with --node)"
    failing = fake_sinfo(tmp_path, "", status=1).node("n")
    assert isinstance(failing, str) and failing.startswith("could not read the state of node n: sinfo exited")
    missing = Slurm(env={"PATH": str(tmp_path / "nowhere")}).node("n")
    assert missing == "could not read the state of node n: sinfo not found on PATH"


def check_env(fake: object, mode: str) -> dict[str, str]:
    return {
        **fake.ctx(mode).env,  # type: ignore[attr-defined]
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
    }


def test_run_check_verdicts(fake_nvidia_smi: object) -> None:
    ok = run_check(["--select=driver,gpu,health"], budget=60, env=check_env(fake_nvidia_smi, "ok"))
    assert ok.verdict == "OK" and ok.line.startswith("OK driver 580.159.04")
    failed = run_check(["--select=driver,gpu,health"], budget=60, env=check_env(fake_nvidia_smi, "mismatch"))
    assert failed.verdict == "FAIL" and failed.line.startswith("FAIL CD101 Driver/library version mismatch")


def test_run_check_past_its_budget_is_no_verdict(fake_nvidia_smi: object) -> None:
    outcome = run_check(["--timeout=30"], budget=2, env=check_env(fake_nvidia_smi, "hang"))
    assert outcome == Outcome("UNKNOWN", "UNKNOWN cuda-doctor check did not finish in 2 s")


def test_run_check_usage_error_is_no_verdict(fake_nvidia_smi: object) -> None:
    outcome = run_check(["--select=driver", "--fail-on=loud"], budget=60, env=check_env(fake_nvidia_smi, "ok"))
    assert outcome.verdict == "UNKNOWN"
    assert outcome.line.startswith("UNKNOWN cuda-doctor check exited with status 2: ") and "loud" in outcome.line


def test_the_hook_script_runs_this_installation(tmp_path: Path) -> None:
    script = tmp_path / "hook"
    script.write_text(hook_script("health-check", python=sys.executable))
    script.chmod(0o755)
    # slurmd gives it no PATH; --help proves the exec line reaches cuda-doctor's sub-command
    proc = subprocess.run(
        [str(script), "--help"], env={"PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "Drain this node when the fast check fails" in proc.stdout
    assert hook_script("prolog", python="/opt/my env/bin/python").splitlines()[-1] == (
        "exec '/opt/my env/bin/python' -m cuda_doctor slurm prolog \"$@\""
    )


def test_an_xid_that_needs_a_reboot_drains_with_the_xid_in_the_reason(tmp_path: Path) -> None:
    facts = json.loads((REPO / "tests" / "rules" / "h200_facts.json").read_text(encoding="utf-8"))
    fallen = {"code": 79, "pci": "0000:2b:00", "at_s": 240.0, "text": "GPU has fallen off the bus."}
    facts["values"].update({"kernel_log.xids": [fallen], "container.detected": False})
    saved = tmp_path / "node.json"
    saved.write_text(json.dumps({"facts": facts}), encoding="utf-8")
    argv = [sys.executable, "-m", "cuda_doctor", "check", "--facts", str(saved), "--format", "oneline"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([*argv, "--select=driver,gpu,health"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    outcome = Outcome("FAIL", proc.stdout.strip())
    assert outcome.line.startswith("FAIL CD607") and "Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in outcome.line
    action = decide(outcome, NodeState("gpu-07", "idle", ""))
    assert action.kind == "drain" and "Xid 79" in action.reason

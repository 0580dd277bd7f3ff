"""``diff`` in proportion, on reports the CLI really wrote.

Reports come from ``cuda-doctor check --fast --save`` and ``cuda-doctor facts --fast`` run as
processes against the fake ``nvidia-smi`` (the H200 recordings, and an older driver's), and
from ``check --facts FILE --save`` of the H200's recorded facts with a smoke run turned into
facts by the smoke probe's own code.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from compare_reports import RECORDED

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.smoke.probe import facts_from_run
from cuda_doctor.smoke.runner import ChildRun, ParsedOutput, SmokeRun
from tests.conftest import run_doctor

TESTS = Path(__file__).resolve().parents[1]
H200_FACTS = TESTS / "rules" / "h200_facts.json"


def doctor(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """cuda-doctor as a process, with only the environment given (never this host's)."""
    base = {
        "PATH": os.defpath,
        "HOME": str(cwd),
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(cwd / ".cache")),
        "CUDA_DOCTOR_DISABLE_NVML": "1",  # the nvidia-smi path, whatever this host has
        "LANG": "C.UTF-8",
    }
    return run_doctor(args, cwd=cwd, env={**base, **(env or {})})


def fake_smi_env(fake_nvidia_smi: Any, mode: str) -> dict[str, str]:
    return dict(fake_nvidia_smi.ctx(mode).env)


# -- downgrades ------------------------------------------------------------------------------


def test_a_driver_downgrade_without_torch_is_worse(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    for name, mode in (("before.json", "ok"), ("after.json", "old")):
        proc = doctor(["check", "--fast", "--save", name], tmp_path, fake_smi_env(fake_nvidia_smi, mode))
        assert (tmp_path / name).is_file(), proc.stderr
    saved = json.loads((tmp_path / "after.json").read_text())
    assert "torch.version" not in saved["facts"]["values"]  # --fast: no framework in either
    result = doctor(["diff", "before.json", "after.json"], tmp_path)
    assert result.returncode == 1, result.stdout
    assert "NVIDIA driver downgraded (580.159.04 → 470.82.01)" in result.stdout
    assert "CUDA (driver API) downgraded (13.0 → 11.4)" in result.stdout
    back = doctor(["diff", "after.json", "before.json"], tmp_path)  # the upgrade
    assert "downgraded" not in back.stdout


def _rejudged(tmp_path: Path, name: str, **changes: Any) -> Path:
    """``check --facts`` of the H200's recorded facts with ``changes``, saved as ``name``."""
    data = json.loads(H200_FACTS.read_text())
    data["values"].update(changes)
    facts = tmp_path / f"{name}.facts.json"
    facts.write_text(json.dumps({"facts": data}))
    proc = doctor(["check", "--facts", str(facts), "--save", name], tmp_path)
    assert (tmp_path / name).is_file(), proc.stderr
    return tmp_path / name


NO_TORCH = {"torch.installed": False, "framework.python_version": "3.12.3"}


def test_the_reported_driver_downgrade_on_a_machine_without_torch(tmp_path: Path) -> None:
    _rejudged(tmp_path, "before.json", **NO_TORCH)
    _rejudged(tmp_path, "after.json", **NO_TORCH, **{"driver.version": "535.104.05", "driver.cuda_version": "12.2"})
    result = doctor(["diff", "before.json", "after.json", "--format", "json"], tmp_path)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    downgraded = {f["name"] for f in data["facts"] if f["downgrade"]}
    assert downgraded == {"driver.version", "driver.cuda_version"}
    assert data["worse"] is True and data["summary"]["facts_downgraded"] == 2


def test_a_framework_and_its_cuda_build_going_down_are_worse(tmp_path: Path) -> None:
    _rejudged(tmp_path, "before.json")
    _rejudged(tmp_path, "after.json", **{"torch.version": "2.9.1+cu128", "torch.cuda_build": "12.8"})
    result = doctor(["diff", "before.json", "after.json"], tmp_path)
    assert result.returncode == 1
    assert "torch downgraded (2.11.0+cu130 → 2.9.1+cu128)" in result.stdout
    assert "torch CUDA build downgraded (13.0 → 12.8)" in result.stdout


def test_a_cuda_build_becoming_cpu_only_is_a_downgrade(tmp_path: Path) -> None:
    _rejudged(tmp_path, "before.json")
    _rejudged(tmp_path, "after.json", **{"torch.version": "2.11.0+cpu", "torch.cuda_build": None})
    result = doctor(["diff", "before.json", "after.json"], tmp_path)
    assert result.returncode == 1 and "torch CUDA build downgraded (13.0 → none)" in result.stdout


# -- the environment -----------------------------------------------------------------------


def _facts_report(fake_nvidia_smi: Any, tmp_path: Path, name: str, **env: str) -> None:
    proc = doctor(
        ["facts", "--fast", "--format", "json", "-o", name], tmp_path, {**fake_smi_env(fake_nvidia_smi, "ok"), **env}
    )
    assert proc.returncode == 0, proc.stderr


def test_hiding_every_gpu_is_shown_and_worse_in_facts_only_reports(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    _facts_report(fake_nvidia_smi, tmp_path, "before.json")
    _facts_report(fake_nvidia_smi, tmp_path, "after.json", CUDA_VISIBLE_DEVICES="1")
    result = doctor(["diff", "before.json", "after.json"], tmp_path)
    assert result.returncode == 1, result.stdout
    assert "Environment" in result.stdout
    row = next(line for line in result.stdout.splitlines() if "CUDA_VISIBLE_DEVICES" in line and "→" in line)
    assert "not set" in row and "1" in row and "hides every GPU" in row
    assert "CUDA_VISIBLE_DEVICES=1 hides every GPU" in result.stdout.splitlines()[-1]


def test_nccl_and_library_path_changes_are_shown_not_judged(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    _facts_report(fake_nvidia_smi, tmp_path, "before.json", LD_LIBRARY_PATH="/usr/local/cuda/lib64")
    _facts_report(
        fake_nvidia_smi,
        tmp_path,
        "after.json",
        LD_LIBRARY_PATH="/opt/old-cuda/lib64",
        NCCL_P2P_DISABLE="1",
        NCCL_IB_HCA="mlx5_0",
        NCCL_AUTH_TOKEN="x",  # a name that looks like a credential is never recorded
    )
    result = doctor(["diff", "before.json", "after.json", "--format", "markdown"], tmp_path)
    assert result.returncode == 0, result.stdout
    assert "| `NCCL_P2P_DISABLE` | not set | 1 |" in result.stdout
    assert "| `NCCL_IB_HCA` | not set | mlx5\\_0 |" in result.stdout  # Markdown shows "mlx5_0"
    assert "| `LD_LIBRARY_PATH` | /usr/local/cuda/lib64 | /opt/old-cuda/lib64 |" in result.stdout
    assert "NCCL_AUTH_TOKEN" not in result.stdout
    assert "3 environment variables changed" in result.stdout


# -- a smoke run on one side only ------------------------------------------------------------


def _h200_smoke_facts() -> dict[str, Any]:
    """The smoke probe's facts for one healthy H200, from the figures the machine recorded."""
    device = {
        "index": 0,
        "errors": [],
        "name": "NVIDIA H200",
        "capability": "9.0",
        "bf16_native": True,
        "alloc_ok": True,
        "fp32_tflops": RECORDED["fp32"],
        "fp16_tflops": RECORDED["fp16"],
        "bf16_tflops": RECORDED["bf16"],
        "fp32_ok": True,
        "fp16_ok": True,
        "bf16_ok": True,
        "matmul_ok": True,
        "h2d_pinned_gbps": RECORDED["h2d_pinned"],
        "h2d_pageable_gbps": RECORDED["h2d_pageable"],
        "d2h_pinned_gbps": RECORDED["h2d_pinned"],
        "launch_us": RECORDED["launch"],
        "amp_step_ok": True,
        "amp_dtype": "bfloat16",
        "amp_loss": 2.31,
        "conv_ok": True,
        "conv_rel_err": 2e-4,
        "cudnn_enabled": True,
        "cudnn_version": RECORDED["cudnn"],
        **{f"{d}_rel_err": 1e-4 for d in ("fp32", "fp16", "bf16")},
        **{f"{d}_tolerance": 1e-2 for d in ("fp32", "fp16", "bf16")},
    }
    driver = ChildRun(
        "driver",
        ParsedOutput(
            ("load libcuda",),
            (),
            {
                "status": "ok",
                "device_count": 1,
                "library": "libcuda.so.1",
                "driver_cuda_version": "13.0",
                "devices": [{"index": 0, "vector_add_ok": True, "name": "NVIDIA H200", "capability": "9.0"}],
            },
        ),
        1.0,
        0,
    )
    result = {"status": "ok", "devices": [device], "device_count": 1, "torch_version": RECORDED["torch_version"]}
    framework = ChildRun("framework", ParsedOutput((), (), result), 20.0, 0)
    facts = facts_from_run(SmokeRun(120.0, driver, framework), ProbeContext(env={}))
    return {**facts.values, "probe.smoke.status": "ok"}


def test_a_smoke_run_on_one_side_is_one_line_not_a_flip_per_rule(tmp_path: Path) -> None:
    _rejudged(tmp_path, "with.json", **_h200_smoke_facts())
    _rejudged(tmp_path, "without.json", **{"probe.smoke.status": "skipped", "probe.smoke.reason": "--no-smoke"})
    judged = json.loads((tmp_path / "with.json").read_text())["results"]
    smoke_passes = [r for r in judged if r["category"] in ("smoke", "performance") and r["status"] == "pass"]
    assert len(smoke_passes) >= 8  # the smoke rules really judged the run

    result = doctor(["diff", "with.json", "without.json"], tmp_path)
    assert result.returncode == 0, result.stdout
    notes = [line for line in result.stdout.splitlines() if "smoke run was not run" in line]
    assert notes == [notes[0]] and "the smoke run was not run in AFTER (--no-smoke)" in notes[0]
    assert "Rule outcomes that changed" not in result.stdout
    assert "Smoke figures" not in result.stdout and "Smoke checks" not in result.stdout

    back = doctor(["diff", "without.json", "with.json", "--format", "json"], tmp_path)
    data = json.loads(back.stdout)
    assert back.returncode == 0 and data["rules"] == [] and data["figures"] == []
    assert [(g["probe"], g["missing_in"]) for g in data["not_run"]] == [("smoke", "before")]
    assert data["not_run"][0]["rules"] >= 8


def test_a_smoke_failure_measured_only_in_after_is_still_news(tmp_path: Path) -> None:
    broken = {**_h200_smoke_facts(), "smoke[0].conv_ok": False}
    _rejudged(tmp_path, "without.json", **{"probe.smoke.status": "skipped", "probe.smoke.reason": "--no-smoke"})
    _rejudged(tmp_path, "with.json", **broken)
    result = doctor(["diff", "without.json", "with.json"], tmp_path)
    assert "the smoke run was not run in BEFORE" in result.stdout
    assert result.returncode == 1 and "newly failing" in result.stdout.splitlines()[-1]

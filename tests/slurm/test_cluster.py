"""On a real Slurm cluster: the documented gathering recipe, the health check and the prolog.

Each Slurm task sees a fake ``nvidia-smi`` (tests/fakes/nvidia_smi.py) with NVML disabled;
what it answers is chosen per task (by SLURM_PROCID) or by a file the test rewrites.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Cluster

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "fakes" / "nvidia_smi.py"
FIXTURES = REPO / "tests" / "fixtures" / "h200"
RECIPE_MARK = "<!-- gathering recipe: run as written by tests/slurm/test_cluster.py -->"
#: The recipe's placement options, which a one-node cluster cannot honour; the test's instead.
PLACEMENT, TEST_PLACEMENT = "srun --nodes=16 --ntasks-per-node=1 ", "srun --ntasks=3 "

pytestmark = pytest.mark.slurm


def executable(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    tmp.replace(path)
    return path


def fake_bin(folder: Path, mode_shell: str) -> Path:
    """A folder with ``nvidia-smi`` (the fake, in the mode that ``mode_shell`` prints) and a
    ``cuda-doctor`` that runs this checkout."""
    folder.mkdir(parents=True, exist_ok=True)
    executable(
        folder / "nvidia-smi",
        f'#!/bin/sh\nFAKE_NVIDIA_SMI_MODE="$({mode_shell})"\nexport FAKE_NVIDIA_SMI_MODE\n'
        f'exec "{sys.executable}" "{FAKE}" "$@"\n',
    )
    executable(folder / "cuda-doctor", f'#!/bin/sh\nexec "{sys.executable}" -m cuda_doctor "$@"\n')
    return folder


def check_env(bindir: Path, cluster: Cluster, **extra: str) -> dict[str, str]:
    """What slurmd gives its programs (next to nothing), plus the fake GPU and this checkout."""
    return {
        "PATH": f"{bindir}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "SLURM_CONF": str(cluster.conf),
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp"),
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "FAKE_NVIDIA_SMI_FIXTURES": str(FIXTURES),
        **extra,
    }


def recipe(doc: Path) -> list[str]:
    """The shell lines of the fenced block right after RECIPE_MARK."""
    text = doc.read_text(encoding="utf-8")
    assert RECIPE_MARK in text, f"{doc} has no gathering recipe"
    block = re.search(r"```bash\n(.*?)```", text[text.index(RECIPE_MARK) :], re.S)
    assert block is not None
    return block.group(1).replace("\\\n", "").splitlines()


def test_the_documented_srun_recipe_finds_the_odd_node(slurm_cluster: Cluster, tmp_path: Path) -> None:
    lines = recipe(REPO / "docs" / "cluster.md")
    srun = next(line for line in lines if line.startswith("srun "))
    assert srun.startswith(PLACEMENT)
    # docs/compare.md shows the same recipe
    compare = (REPO / "docs" / "compare.md").read_text(encoding="utf-8").replace("\\\n", "")
    assert " ".join(srun.split()) in " ".join(compare.split())
    # task 2 runs on a machine with an older driver than the others
    bindir = fake_bin(tmp_path / "bin", 'if [ "$SLURM_PROCID" = 2 ]; then echo old; else echo ok; fi')
    work = tmp_path / "work"
    work.mkdir()
    script = "\n".join(TEST_PLACEMENT + line[len(PLACEMENT) :] if line is srun else line for line in lines)
    env = {**check_env(bindir, slurm_cluster), "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = sorted(p.name for p in (work / "reports").glob("*.json"))
    assert reports == ["0.json", "1.json", "2.json"], reports
    assert "470.82.01" in proc.stdout and "Nodes that differ from the majority" in proc.stdout
    fleet = subprocess.run(
        ["cuda-doctor", "fleet", "--format", "json", "reports"], cwd=work, env=env, capture_output=True, text=True
    )
    result = json.loads(fleet.stdout)
    assert result["majority"]["driver"] == "580.159.04" and result["majority_count"] == 2
    odd = [Path(node["path"]).name for node in result["differing"]]
    assert odd == ["2.json"]


@pytest.fixture
def health_check(slurm_admin: Cluster, tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """The installed hook (as `cuda-doctor slurm script health-check` writes it), the file that
    sets the fake's mode, and the environment slurmd would run it with."""
    mode = tmp_path / "mode"
    mode.write_text("ok")
    bindir = fake_bin(tmp_path / "bin", f'cat "{mode}"')
    env = check_env(bindir, slurm_admin, SLURMD_NODENAME=slurm_admin.node)
    written = subprocess.run(
        ["cuda-doctor", "slurm", "script", "health-check"], env=env, capture_output=True, text=True, check=True
    )
    return executable(tmp_path / "cuda-doctor-health-check", written.stdout), mode, env


def run_hook(hook: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(hook)], env=env, capture_output=True, text=True, timeout=120)


def test_health_check_drains_a_failing_node_and_undrains_it_when_fixed(
    slurm_admin: Cluster, health_check: tuple[Path, Path, dict[str, str]]
) -> None:
    hook, mode, env = health_check
    mode.write_text("not_loaded")
    failed = run_hook(hook, env)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    state, reason = slurm_admin.state()
    assert "drain" in state
    assert reason.startswith("cuda-doctor: FAIL CD101 the NVIDIA kernel driver is not loaded")
    drained = slurm_admin.run("sinfo", "--list-reasons", "--noheader", "--format=%E").stdout
    assert "cuda-doctor: FAIL CD101" in drained

    mode.write_text("ok")
    fixed = run_hook(hook, env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "undrained" in fixed.stdout
    assert "drain" not in slurm_admin.state()[0]


def test_health_check_leaves_an_administrators_drain_alone(
    slurm_admin: Cluster, health_check: tuple[Path, Path, dict[str, str]]
) -> None:
    hook, mode, env = health_check
    admin = "replacing a fan (ticket 4711)"
    slurm_admin.run("scontrol", "update", f"nodename={slurm_admin.node}", "state=drain", f"reason={admin}")
    mode.write_text("not_loaded")
    assert run_hook(hook, env).returncode == 1
    assert slurm_admin.state()[1] == admin  # not taken over, or a passing check would undrain it
    mode.write_text("ok")
    passed = run_hook(hook, env)
    assert passed.returncode == 0 and "left alone" in passed.stdout
    state, reason = slurm_admin.state()
    assert "drain" in state and reason == admin


def test_prolog_keeps_a_job_off_a_failing_node(
    slurm_admin: Cluster, health_check: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    hooks = slurm_admin.conf.parent / "prolog.d"
    if not hooks.is_dir():
        pytest.skip(f"{slurm_admin.conf} is not a cluster of .ci/start-slurm.sh (no {hooks} to put a prolog in)")
    health, mode, env = health_check
    written = subprocess.run(
        ["cuda-doctor", "slurm", "script", "prolog"], env=env, capture_output=True, text=True, check=True
    )
    prolog = executable(tmp_path / "cuda-doctor-prolog", written.stdout)
    # slurmd runs the prolog with SLURMD_NODENAME and SLURM_CONF but no PATH: add the fake GPU
    exports = "".join(f"export {k}='{v}'\n" for k, v in env.items() if k not in ("SLURMD_NODENAME", "SLURM_CONF"))
    installed = executable(hooks / f"cuda-doctor-{os.getpid()}", f"#!/bin/sh\n{exports}exec {prolog}\n")
    try:
        mode.write_text("not_loaded")
        job = slurm_admin.run("srun", "--ntasks=1", "true", timeout=60)
        assert job.returncode != 0 and "prolog" in job.stderr.lower(), job.stderr
        state, reason = slurm_admin.state()
        assert "drain" in state and reason.startswith("cuda-doctor: FAIL CD101"), (state, reason)

        mode.write_text("ok")
        assert run_hook(health, env).returncode == 0
        assert "drain" not in slurm_admin.state()[0]
        job = slurm_admin.run("srun", "--ntasks=1", "true", timeout=60)
        assert job.returncode == 0, job.stderr
    finally:
        installed.unlink()

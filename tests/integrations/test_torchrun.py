"""``require()`` under a real ``torchrun`` with three local ranks on a machine with H200s (the fake
NVML): only local rank 0 checks; the others take its verdict and stop with the same checklist."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.api.fake_machine import h200_env

pytestmark = pytest.mark.slow

WORKER = r"""
import json, os, cuda_doctor, cuda_doctor.api as api
if os.environ["LOCAL_RANK"] != "0":
    def refuse(**options):
        raise AssertionError("a rank other than local rank 0 checked")
    api.check = refuse
try:
    said = "RETURNED " + cuda_doctor.require()
except cuda_doctor.PreflightError as error:
    said = "RAISED " + error.headline + "\n" + str(error)
with open(f"rank-{os.environ['LOCAL_RANK']}.json", "w") as out:
    json.dump({"said": said, "run_id": os.environ.get("TORCHELASTIC_RUN_ID")}, out)
"""


def torchrun(trainers_python: Path, tmp_path: Path, **env: str) -> dict[str, dict[str, str]]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "worker.py").write_text(WORKER, encoding="utf-8")
    argv = [str(trainers_python), "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", "worker.py"]
    done = subprocess.run(
        argv, capture_output=True, text=True, cwd=work, env=h200_env(tmp_path, **env), timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {rank: json.loads((work / f"rank-{rank}.json").read_text(encoding="utf-8")) for rank in "012"}


def test_three_ranks_on_a_broken_node_stop_with_rank_0s_checklist(trainers_python: Path, tmp_path: Path) -> None:
    ranks = torchrun(trainers_python, tmp_path, CUDA_VISIBLE_DEVICES="7")
    said = {rank: got["said"] for rank, got in ranks.items()}
    assert said["0"].startswith("RAISED FAIL CD401 ") and "$ export CUDA_VISIBLE_DEVICES=0" in said["0"]
    assert said["1"] == said["2"] == said["0"]
    assert ranks["0"]["run_id"]  # torchrun's own variables were there


def test_three_ranks_on_a_healthy_node_go_on(trainers_python: Path, tmp_path: Path) -> None:
    said = {rank: got["said"] for rank, got in torchrun(trainers_python, tmp_path).items()}
    assert said["0"].startswith("RETURNED OK driver 580.159.04 (CUDA 13.0), 1x NVIDIA H200")
    assert said["1"] == said["2"] == said["0"]

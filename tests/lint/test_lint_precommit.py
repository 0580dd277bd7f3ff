"""The real hook: ``pre-commit try-repo`` of this repository in a temporary training repository."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRE_COMMIT = shutil.which("pre-commit")

TRAIN_BAD = """\
import argparse

import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)
args = parser.parse_args()
model = torch.nn.Linear(8, 1).cuda(args.local_rank)
optimizer = torch.optim.AdamW(model.parameters())
loader = DataLoader(torch.randn(64, 8), batch_size=8, num_workers=4, pin_memory=True)
for batch in loader:
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        loss = model(batch.cuda(non_blocking=True)).pow(2).mean()
    loss.backward()
    optimizer.step()
"""
TRAIN_FIXED = (
    TRAIN_BAD.replace('parser.add_argument("--local_rank", type=int, default=0)\n', "")
    .replace(".cuda(args.local_rank)", ".cuda()")
    .replace("torch.cuda.amp.autocast(dtype=", 'torch.autocast("cuda", dtype=')
)
DOCKER_BAD = """\
FROM nvidia/cuda:12.3-base
RUN pip install torch==2.6.0+cu123
CMD ["python", "-m", "torch.distributed.launch", "--nproc_per_node", "2", "train.py"]
"""
DOCKER_FIXED = """\
FROM nvidia/cuda:13.0.2-runtime-ubuntu22.04
RUN pip install torch==2.11.0 --index-url https://download.pytorch.org/whl/cu130
CMD ["torchrun", "--nproc-per-node", "2", "train.py"]
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def try_repo(cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [PRE_COMMIT, "try-repo", str(ROOT), "cuda-doctor-lint", "--all-files"],  # type: ignore[list-item]
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
@pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed (pip install pre-commit)")
def test_hook_fails_then_passes_after_the_fixes(tmp_path: Path) -> None:
    work = tmp_path / "trainer"
    work.mkdir()
    git(work, "init", "-q")
    git(work, "config", "user.email", "t@example.com")
    git(work, "config", "user.name", "t")
    (work / "train.py").write_text(TRAIN_BAD)
    (work / "Dockerfile").write_text(DOCKER_BAD)
    (work / "README.md").write_text("not checked\n")
    git(work, "add", ".")

    failed = try_repo(work, tmp_path / "cache")
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    for expected in (
        "train.py:7:21: CDL007 warning:",
        "train.py:13:10: CDL001 warning: `torch.cuda.amp.autocast` is deprecated",
        "Dockerfile:1:6: CDL101 error: `nvidia/cuda:12.3-base`",
        "Dockerfile:2:1: CDL201 error: `torch==2.6.0+cu123`: torch 2.6 has no cu123 wheels",
        "Dockerfile:3:1: CDL006 warning:",
    ):
        assert expected in output, output
    assert "README.md" not in output

    (work / "train.py").write_text(TRAIN_FIXED)
    (work / "Dockerfile").write_text(DOCKER_FIXED)
    git(work, "add", ".")
    passed = try_repo(work, tmp_path / "cache")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "cuda-doctor lint" in passed.stdout and "Passed" in passed.stdout

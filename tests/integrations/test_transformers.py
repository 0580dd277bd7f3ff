"""The transformers callback in a real ``Trainer.train`` (transformers, CPU-only torch) on a machine
with H200s (the fake NVML): a ``CUDA_VISIBLE_DEVICES`` that names a missing GPU stops training with
the checklist before its first step; a healthy machine trains, with the verdict in the log."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.api.fake_machine import h200_env

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow


def train(trainers_python: Path, tmp_path: Path, **env: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(trainers_python), str(HERE / "transformers_train.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=h200_env(tmp_path, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **env),
        timeout=600,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_a_missing_gpu_stops_training_with_the_checklist(trainers_python: Path, tmp_path: Path) -> None:
    code, out, err = train(trainers_python, tmp_path, CUDA_VISIBLE_DEVICES="7")
    assert code != 0
    assert "training step" not in out and "TRAINED" not in out
    assert "cuda_doctor.api.PreflightError" in err
    assert "✗ CUDA_VISIBLE_DEVICES=7: '7' names no GPU on this machine" in err
    assert "$ export CUDA_VISIBLE_DEVICES=0" in err
    assert "\x1b[" not in err


def test_a_healthy_machine_trains_and_logs_the_verdict(trainers_python: Path, tmp_path: Path) -> None:
    code, out, err = train(trainers_python, tmp_path)
    assert code == 0, err
    assert "TRAINED steps=3" in out
    assert "cuda_doctor INFO cuda-doctor: OK driver 580.159.04 (CUDA 13.0), 1x NVIDIA H200" in out

"""``check`` where the docker SDK is not installed, as a real process: the SDK is mentioned only
where a Docker engine or an ``--image`` makes it matter, once, with a command that works."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"


def check(fake: Any, tmp_path: Path, docker_host: str, *args: str) -> str:
    blocker = tmp_path / "no-sdk"
    blocker.mkdir(exist_ok=True)
    # an importable `docker` that fails as a missing package does: the SDK is not there
    (blocker / "docker.py").write_text("raise ModuleNotFoundError(\"No module named 'docker'\", name='docker')\n")
    env = {
        **fake.ctx().env,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PYTHONPATH": f"{blocker}{os.pathsep}{REPO}",
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
        "DOCKER_HOST": docker_host,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=180,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "pip install cuda-doctor" not in proc.stdout  # that PyPI name is another project's
    return proc.stdout


def test_no_engine_and_no_image_no_mention(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    out = check(fake_nvidia_smi, tmp_path, f"unix://{tmp_path}/no-docker.sock", "--no-smoke")
    assert "SDK" not in out and "pip install docker" not in out
    assert "no Docker engine here" in out


def test_an_image_mentions_it_once_with_a_working_command(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    out = check(fake_nvidia_smi, tmp_path, f"unix://{tmp_path}/no-docker.sock", "--fast", "--image", IMAGE)
    assert out.count("SDK") == 1, out
    assert f"$ {sys.executable} -m pip install 'docker>=7.0'" in out
    assert "pip install '.[docker]'" in out  # from a checkout of this repository


def test_an_engine_socket_mentions_it_once(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "docker.sock"))
    try:
        out = check(fake_nvidia_smi, tmp_path, f"unix://{tmp_path}/docker.sock", "--no-smoke")
    finally:
        listening.close()
    assert out.count("SDK") == 1, out
    assert f"$ {sys.executable} -m pip install 'docker>=7.0'" in out

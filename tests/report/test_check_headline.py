"""The checklist's first line tells the truth about torch: its build, or that its import failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.facts import Facts
from cuda_doctor.report.check import render

REPO = Path(__file__).resolve().parents[2]


def headline(**facts: object) -> str:
    known = Facts()
    for name, value in facts.items():
        known.set(name.replace("__", "."), value)
    known.mark_unknown("torch.cuda_build", "import torch failed: x")
    return render(Report(known, []), "text").splitlines()[0]


def test_an_unknown_build_is_not_called_cpu_only() -> None:
    assert headline(torch__installed=True, torch__version="2.5.1") == "torch 2.5.1"
    line = headline(driver__version="580.159.04", torch__installed=True)
    assert line.startswith("driver 580.159.04 (CUDA unknown) · torch: version unknown (")
    assert "None" not in line and "?" not in line


def test_a_failing_import_of_torch_as_a_real_process(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    """It showed as "torch None (CPU-only)"."""
    site = tmp_path / "site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(
        "raise ImportError('while loading the CUDA libraries:\\n"
        "libcudnn.so.9: cannot open shared object file: No such file or directory')\n"
    )
    ctx = fake_nvidia_smi.ctx()
    env = {
        **ctx.env,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{REPO}",
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", "--no-smoke", "--python", sys.executable],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    last_line = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    first = proc.stdout.splitlines()[0]
    assert first.endswith(f" · torch: import failed ({last_line})"), first
    assert "None" not in first and "CPU-only" not in first
    section = proc.stdout.split("[?] Framework build", 1)[1].split("\n[", 1)[0]
    assert f"could not check: import torch failed: {last_line}" in section

"""A process that stands for a machine with H200s: the fake ``pynvml`` first on PYTHONPATH, a
library the loader takes for the driver's, and this checkout importable.  Tests of the API and of
the callbacks run their scripts in such a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import with_driver_library

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FAKE_PYNVML = TESTS / "fakes" / "pynvml_h200"


def h200_env(tmp_path: Path, *, gpus: int = 1, **changes: str) -> dict[str, str]:
    """This process's environment as a machine with ``gpus`` healthy H200s and no launcher; ``changes`` on top."""
    env = with_driver_library(dict(os.environ), tmp_path / "driver")
    for name in ("CUDA_DOCTOR_DISABLE_NVML", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        env.pop(name, None)
    for name in [name for name in env if name.startswith(("SLURM_", "TORCHELASTIC_", "PMI_", "OMPI_"))]:
        env.pop(name)
    for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(FAKE_PYNVML), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["FAKE_PYNVML_GPUS"] = str(gpus)
    env["TMPDIR"] = str(tmp_path / "tmp")  # the verdicts' per-node folder, private to the test
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env.update(changes)
    return env


def run_script(
    source: str, tmp_path: Path, env: dict[str, str], python: Path | str = sys.executable, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as a script in a fresh folder with ``env``."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    script = work / "script.py"
    script.write_text(source, encoding="utf-8")
    return subprocess.run(
        [str(python), str(script)], capture_output=True, text=True, cwd=work, env=env, timeout=timeout, check=False
    )

"""The one progress line: which probes run and the step each child is at, on a terminal only."""

from __future__ import annotations

import os
import pty
import re
import select
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cuda_doctor.report.progress import ProgressLine, progress_line

REPO = Path(__file__).resolve().parents[2]


class Status:
    """What rich's status would show, line by line."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def update(self, text: str) -> None:
        self.shown.append(text)


def test_probes_and_their_childrens_steps() -> None:
    status = Status()
    line = ProgressLine(status)
    line("start", "gpu")
    line("start", "framework")
    line.step("framework", "import torch")
    line("done", "gpu")
    line.step("smoke, driver level", "cuInit")
    line("done", "framework")
    assert status.shown == [
        "Checking: gpu…",
        "Checking: gpu, framework…",
        "Checking: gpu, framework: import torch…",
        "Checking: framework: import torch…",
        "Checking: framework: import torch, smoke, driver level: cuInit…",
        "Checking: smoke, driver level: cuInit…",
    ]


def test_a_childs_step_is_shown_as_text() -> None:
    status = Status()
    ProgressLine(status).step("framework", "\x1b]2;PWNED\x07[bold]x")
    assert "\x1b" not in status.shown[0] and "\\x1b]2;PWNED\\x07\\[bold]x" in status.shown[0]


def test_no_line_off_a_terminal() -> None:
    with progress_line(True) as line:  # pytest captures stdout: not a terminal
        assert line is None


def test_smoke_and_check_share_it() -> None:
    """One progress module: the smoke command has no line of its own any more."""
    import cuda_doctor.commands.smoke as smoke

    assert not hasattr(smoke, "step_progress")
    assert smoke.progress_line is progress_line


# -- end to end, on a real terminal ------------------------------------------------------------


def on_a_terminal(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    master, slave = pty.openpty()
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, cwd=cwd) as proc:
        os.close(slave)
        chunks = []
        while select.select([master], [], [], 120)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def doctor_env(fake: Any, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **fake.ctx().env,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
        **extra,
    }


def test_the_framework_probes_import_is_shown(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    """`import torch` can take a minute: the line says that is what runs."""
    site = tmp_path / "site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("import time\ntime.sleep(2)\nraise ImportError('no')\n")
    env = doctor_env(fake_nvidia_smi, tmp_path, PYTHONPATH=f"{tmp_path / 'site'}{os.pathsep}{REPO}")
    argv = [sys.executable, "-m", "cuda_doctor", "check", "--no-smoke", "--python", sys.executable]
    code, out = on_a_terminal(argv, env, tmp_path)
    assert code == 0, out
    assert re.search(r"Checking: [^…\n]*framework: import torch…", out), out


def test_the_smoke_runs_steps_are_shown(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    # an interpreter whose every record comes 0.3 s late: each step lasts long enough to be drawn
    slow = interpreter(
        tmp_path,
        "slow-python",
        f'#!/bin/sh\n"{sys.executable}" "$@" | while IFS= read -r line; do printf "%s\\n" "$line"; sleep 0.3; done\n',
    )
    argv = [sys.executable, "-m", "cuda_doctor", "smoke", "--python", str(slow)]
    code, out = on_a_terminal(argv, doctor_env(fake_nvidia_smi, tmp_path), tmp_path)
    assert code in (0, 1), out
    assert "Checking: smoke, driver level: load libcuda…" in out, out


# -- the interpreters of the reported defects ---------------------------------------------------


def interpreter(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_an_interpreter_that_never_starts_is_not_given_a_smoke_run(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    sleeper = interpreter(tmp_path, "script-that-sleeps", f"#!/bin/sh\necho started >> {log}\nexec sleep 100\n")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", "--python", str(sleeper), "--timeout", "1"],
        capture_output=True,
        text=True,
        env=doctor_env(fake_nvidia_smi, tmp_path),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert time.monotonic() - started < 120
    assert "the smoke run was skipped" in proc.stdout, proc.stdout
    # the check that --python is an interpreter (not refused: it may only be slow), the framework
    # probe's start, the JAX probe's and the compile toolchain probe's, and no smoke children
    assert log.read_text().count("started") == 4


def test_an_interpreter_that_quotes_the_probe_is_cut(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    # answers the check that --python is a Python interpreter as one would, then quotes every probe
    answer = 'cuda-doctor-interpreter {"version": [3, 12, 3], "frameworks": []}'
    quoting = interpreter(tmp_path, "quoting-python", f"#!/bin/sh\necho '{answer}'\nexec /bin/ls \"$@\"\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", "--python", str(quoting)],
        capture_output=True,
        text=True,
        env=doctor_env(fake_nvidia_smi, tmp_path),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert "more characters)" in proc.stdout
    # not the probe's 15 KB of source, again and again (the JAX checks say why too, one line each)
    assert len(proc.stdout) < 10000, len(proc.stdout)

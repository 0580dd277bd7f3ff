"""Peak memory and wall time of `cuda-doctor check --fast --timeout T` when nvidia-smi misbehaves.

The fake nvidia-smi of the tests (tests/fakes/nvidia_smi.py) stands in for the driver's:
  flood  it becomes `yes`, printing without end (cuda-doctor keeps 8 MiB of a child's output)
  hang   it never answers (cuda-doctor kills its process group at the timeout)
NVML is disabled (CUDA_DOCTOR_DISABLE_NVML=1), so the GPU probe asks nvidia-smi whatever this
machine has.  Targets: peak RSS at most 200 MB, and done within the timeout + 2 s.

The peak is the resident set of the cuda-doctor process (and of any child it reaped), from
getrusage(RUSAGE_CHILDREN) in a fresh wrapper process, so nothing else this machine or a test
run did counts.

Usage: python benchmarks/flood_rss.py [--mode flood|hang|ok] [--timeout 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "fakes" / "nvidia_smi.py"
FIXTURES = REPO / "tests" / "fixtures" / "h200"
RSS_TARGET = 200 * 10**6
SLACK_S = 2.0

# Runs argv, then reports what the kernel counted for it: a process of its own, so that the
# children of whoever calls this (a test run) do not count.
_WRAPPER = """
import json, resource, subprocess, sys, time
argv, env = json.loads(sys.argv[1])
start = time.monotonic()
done = subprocess.run(argv, env=env, capture_output=True, text=True)
seconds = time.monotonic() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"peak_rss": peak, "seconds": seconds, "returncode": done.returncode,
                  "stdout": done.stdout, "stderr": done.stderr}))
"""


class Measurement(NamedTuple):
    peak_rss: int  # bytes
    seconds: float
    returncode: int
    stdout: str
    stderr: str


def install_fake(folder: Path) -> Path:
    """The fake nvidia-smi as an executable in ``folder``; returns the folder."""
    exe = folder / "nvidia-smi"
    exe.write_text(f"#!{sys.executable}\n{FAKE.read_text(encoding='utf-8')}", encoding="utf-8")
    exe.chmod(0o755)
    return folder


def fake_env(bindir: Path, mode: str, workdir: Path) -> dict[str, str]:
    """The environment of a cuda-doctor that meets the fake nvidia-smi first on PATH."""
    return {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.defpath}",
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "FAKE_NVIDIA_SMI_MODE": mode,
        "FAKE_NVIDIA_SMI_FIXTURES": str(FIXTURES),
        "FAKE_NVIDIA_SMI_PIDFILE": str(workdir / "nvidia-smi.pid"),
        "XDG_CACHE_HOME": str(workdir / "cache"),
    }


def doctor_argv(timeout: float) -> list[str]:
    return [sys.executable, "-m", "cuda_doctor", "check", "--fast", "--timeout", f"{timeout:g}"]


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> Measurement:
    env = {**env, "PYTHONPATH": f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, json.dumps([argv, env])],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return Measurement(**json.loads(done.stdout))


def run_mode(mode: str, timeout: float, workdir: Path) -> Measurement:
    bindir = workdir / "bin"
    bindir.mkdir(exist_ok=True)
    install_fake(bindir)
    return measure(doctor_argv(timeout), fake_env(bindir, mode, workdir), workdir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("flood", "hang", "ok"), default="flood")
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]} on {os.uname().nodename}: check --fast --timeout {args.timeout:g}, "
        f"nvidia-smi {args.mode}, {args.runs} runs"
    )
    peaks, times = [], []
    with tempfile.TemporaryDirectory(prefix="cuda-doctor-flood-") as folder:
        for _ in range(args.runs):
            got = run_mode(args.mode, args.timeout, Path(folder))
            peaks.append(got.peak_rss)
            times.append(got.seconds)
            finding = [line.strip() for line in got.stdout.splitlines() if line.strip().startswith("✗ ")]
            first = finding[0] if finding else "(no finding)"
            print(f"  exit {got.returncode}  peak RSS {got.peak_rss / 1e6:6.1f} MB  {got.seconds:5.2f} s  {first[:90]}")
    peak, wall = max(peaks), statistics.median(times)
    rss_ok = "ok" if peak <= RSS_TARGET else "OVER TARGET"
    time_ok = "ok" if max(times) <= args.timeout + SLACK_S else "OVER TARGET"
    print(f"peak RSS {peak / 1e6:.1f} MB (target ≤ {RSS_TARGET / 1e6:.0f} MB) {rss_ok}")
    print(f"wall time median {wall:.2f} s, max {max(times):.2f} s (target ≤ {args.timeout + SLACK_S:g} s) {time_ok}")


if __name__ == "__main__":
    main()

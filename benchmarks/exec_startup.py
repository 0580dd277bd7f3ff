"""How much time ``cuda-doctor exec`` adds to a container's start.

Runs ``cuda-doctor exec -- true`` and plain ``true`` many times each and prints the medians
and their difference.  Target: at most 0.5 s added.  The check is the fast one (no framework
import), with a configuration that selects every rule, so the figure includes probing,
deriving, judging and rendering.

    python benchmarks/exec_startup.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.5


def timed(argv: list[str], cwd: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited with {proc.returncode}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as cwd:
        # --warn-only: measure the full path to exec even where this machine has findings (no GPU).
        doctor = [sys.executable, "-m", "cuda_doctor", "exec", "--warn-only", "--", "true"]
        bare = ["true"]
        timed(doctor, cwd, env)  # warm the file cache once
        with_doctor = [timed(doctor, cwd, env) for _ in range(args.runs)]
        without = [timed(bare, cwd, env) for _ in range(args.runs)]
    added = statistics.median(with_doctor) - statistics.median(without)
    print(f"runs: {args.runs}")
    print(f"true                          median {statistics.median(without) * 1000:8.1f} ms")
    print(
        f"cuda-doctor exec -- true      median {statistics.median(with_doctor) * 1000:8.1f} ms"
        f"  (min {min(with_doctor) * 1000:.1f}, max {max(with_doctor) * 1000:.1f})"
    )
    verdict = "within" if added <= TARGET_S else "OVER"
    print(f"added by exec                 median {added * 1000:8.1f} ms  ({verdict} the {TARGET_S:g} s target)")


if __name__ == "__main__":
    main()

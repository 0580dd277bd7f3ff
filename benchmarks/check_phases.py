"""Where the full `cuda-doctor check` spends its time: each probe, each step of the smoke run,
torch's and JAX's own start-up, next to the reference `python -c "import torch; torch.cuda.init()"`.

Runs the reference and `check --format json --python PY` in turn, N rounds, and prints, for
every timing the report carries (``probe.<name>.seconds``, ``torch.import_seconds``,
``jax.*_seconds``, ``smoke[i].step_seconds``, …) its median, minimum and maximum, then phase 1
(the longest read-only probe) and phase 2 (the smoke probes, one after the other).  The check's
wall time minus both phases is what the process spends around them (start-up, judging, output).

Usage: python benchmarks/check_phases.py [--runs 5] [--python PY] [--save DIR]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHASE_1 = ("gpu", "environment", "toolkit", "framework", "jax", "docker", "kernel")
PHASE_2 = ("smoke", "jax_gpu", "nccl")


def timings(values: dict[str, object]) -> dict[str, float]:
    """Every duration in a report's known facts, by name."""
    found: dict[str, float] = {}
    for name, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and name.endswith("seconds"):
            found[name] = float(value)
        elif name.endswith("step_seconds") and isinstance(value, dict):
            for step, seconds in value.items():
                if isinstance(seconds, (int, float)):
                    found[f"{name}[{step}]"] = float(seconds)
    for phase, names in (("phase 1 (longest probe)", PHASE_1), ("phase 2 (sum)", PHASE_2)):
        spans = [found.get(f"probe.{name}.seconds") or 0.0 for name in names]
        found[phase] = max(spans) if phase.startswith("phase 1") else sum(spans)
    return found


def run_check(python: str, env: dict[str, str], save: Path | None, round_: int) -> tuple[float, dict[str, float]]:
    command = [sys.executable, "-m", "cuda_doctor", "check", "--format", "json", "--python", python]
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=600)
    wall = time.perf_counter() - start
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(f"round {round_}: no JSON report (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
        return wall, {}
    if save is not None:
        (save / f"check-{round_}.json").write_text(proc.stdout)
    return wall, timings(report["facts"]["values"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default="python3", help="the interpreter with torch (and JAX) to check")
    parser.add_argument("--save", type=Path, default=None, help="keep each report in this folder")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # imports as users meet them: byte-code written (pip compiles what it installs)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(str(REPO / "cuda_doctor"), quiet=1)
    reference = [args.python, "-c", "import torch; torch.cuda.init()"]
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as cwd:  # no stray module in the working folder
        subprocess.run(reference, cwd=cwd, env=env, capture_output=True, check=False)  # warm the file cache
        walls: dict[str, list[float]] = {"reference": [], "check": []}
        samples: dict[str, list[float]] = {}
        for round_ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(reference, cwd=cwd, env=env, capture_output=True, check=False)
            walls["reference"].append(time.perf_counter() - start)
            wall, found = run_check(args.python, env, args.save, round_)
            walls["check"].append(wall)
            for name, seconds in found.items():
                samples.setdefault(name, []).append(seconds)
    ref, mine = statistics.median(walls["reference"]), statistics.median(walls["check"])
    print(f"{args.runs} rounds; medians (min-max) in seconds")
    print(f"  {'reference: import torch; torch.cuda.init()':<58} {_spread(walls['reference'])}")
    print(f"  {'check (wall)':<58} {_spread(walls['check'])}   ratio {mine / ref:.2f}")
    for name in sorted(samples, key=lambda n: -statistics.median(samples[n])):
        print(f"  {name:<58} {_spread(samples[name])}")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} ({min(values):.3f}-{max(values):.3f})"


if __name__ == "__main__":
    main()

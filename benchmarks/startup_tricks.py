"""What each start-up measure saves: `check --fast` from several source trees, side by side.

Each tree is a copy of cuda-doctor's source (``cuda_doctor/`` and ``rules/``), for example an
older commit with one measure switched off.  Every round runs the reference and each tree's
`check --fast` once, in a shuffled order with a pause before each, so that a machine whose
speed drifts weighs on all of them alike; medians are printed, and for each tree the difference
from the first one named (the baseline) and the ratio to the reference.

Usage:
  python benchmarks/startup_tricks.py --runs 31 --tree all=.bench/old --tree no-gc=.bench/old-no-gc ...
The reference is ``python -c "import pynvml, click, rich"`` (the same interpreter).
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

PAUSE = 0.03


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument(
        "--tree", action="append", required=True, help="NAME=PATH of a source tree; the first is the baseline"
    )
    parser.add_argument("--format", default="json", choices=("json", "text"))
    args = parser.parse_args()
    py = sys.executable
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "reference": ([py, "-c", "import pynvml, click, rich"], env)
    }
    for spec in args.tree:
        name, _, path = spec.partition("=")
        root = Path(path).resolve()
        compileall.compile_dir(str(root / "cuda_doctor"), quiet=1)
        tree_env = {**env, "PYTHONPATH": str(root)}
        commands[name] = ([py, "-m", "cuda_doctor", "check", "--fast", "--format", args.format], tree_env)
    for argv, command_env in commands.values():
        timed(argv, command_env)  # warm the file cache
    samples: dict[str, list[float]] = {name: [] for name in commands}
    order = random.Random(7)
    for _ in range(args.runs):
        names = list(commands)
        order.shuffle(names)
        for name in names:
            time.sleep(PAUSE)
            samples[name].append(timed(*commands[name]))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    baseline = args.tree[0].partition("=")[0]
    where = f"python {sys.version.split()[0]} on {os.uname().nodename}"
    print(f"{where}: check --fast --format {args.format}, {args.runs} rounds, medians")
    for name, median in medians.items():
        low, high = min(samples[name]), max(samples[name])
        line = f"{name:<16} {median * 1000:7.1f} ms  (min {low * 1000:6.1f}, max {high * 1000:6.1f})"
        if name != "reference":
            line += f"  vs {baseline}: {(median - medians[baseline]) * 1000:+6.1f} ms"
            line += f"  ratio to reference {median / medians['reference']:.2f}"
        print(line)


if __name__ == "__main__":
    main()

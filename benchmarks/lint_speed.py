"""Lint speed on a large real tree: the Python files of an installed torch.

    python benchmarks/lint_speed.py [TREE] [--runs N]

Without TREE it looks for torch in .cache/*/lib/python3*/site-packages/torch (make one with
`python -m venv .cache/torchvenv && .cache/torchvenv/bin/pip install torch==2.13.0`) or in the
running interpreter.  Lints the tree N times (default 3) in parallel mode and in one process and
prints files per second for each run and the median, with the machine's load average (the host
may be shared: a loaded machine gives lower figures) and the CPU time of this process.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_doctor.lint.engine import LintOptions, lint_paths  # noqa: E402


def find_tree() -> Path | None:
    for candidate in sorted(glob.glob(str(ROOT / ".cache/*/lib/python3*/site-packages/torch"))):
        return Path(candidate)
    spec = importlib.util.find_spec("torch")
    return Path(spec.origin).parent if spec and spec.origin else None


def load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
        return f"load {one:.2f} {five:.2f} {fifteen:.2f}"
    except OSError:
        return "load unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    tree = args.tree or find_tree()
    if tree is None or not tree.is_dir():
        print("no tree to lint: pass a directory, or install torch into .cache/torchvenv")
        return 2
    for label, jobs in (("parallel", 0), ("one process", 1)):
        rates = []
        for _ in range(args.runs):
            before = load()
            start, cpu = time.perf_counter(), time.process_time()
            report = lint_paths([tree], LintOptions(jobs=jobs))
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            rates.append(report.files / elapsed)
            print(
                f"{label:>12}: {report.files} files ({report.parsed} parsed) in {elapsed:.2f} s "
                f"= {rates[-1]:,.0f} files/s ({cpu:.2f} s CPU here), {len(report.findings)} findings; {before}"
            )
        print(f"{label:>12}: median {statistics.median(rates):,.0f} files/s over {args.runs} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

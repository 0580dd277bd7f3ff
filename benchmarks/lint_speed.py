"""Lint speed on a large real tree: the Python files of an installed torch.

    python benchmarks/lint_speed.py [TREE]

Without TREE it looks for torch in .cache/torchvenv (make it with
`python -m venv .cache/torchvenv && .cache/torchvenv/bin/pip install torch==2.13.0`) or in the
running interpreter.  Prints files per second for a cold-ish and a warm run.
"""

from __future__ import annotations

import glob
import importlib.util
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


def main() -> int:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else find_tree()
    if tree is None or not tree.is_dir():
        print("no tree to lint: pass a directory, or install torch into .cache/torchvenv")
        return 2
    for label, jobs in (("parallel", 0), ("one process", 1)):
        start = time.perf_counter()
        report = lint_paths([tree], LintOptions(jobs=jobs))
        elapsed = time.perf_counter() - start
        print(
            f"{label:>12}: {report.files} files ({report.parsed} parsed) in {elapsed:.2f} s "
            f"= {report.files / elapsed:,.0f} files/s, {len(report.findings)} findings"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

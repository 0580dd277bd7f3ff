"""What the smoke run's compile step costs, with its toolchain folder new (the first check on a
machine, or after the toolchain changed) and reused (every later check).

Each round runs ``cuda-doctor check --format json`` twice with one fresh ``XDG_CACHE_HOME``: the
first compiles into a new toolchain folder, the second reuses it.  Prints, per case, the median
of the whole check; of the time the compile level adds after the framework level (from handing it
the GPUs to its end: what the step costs a check); of its imports, which overlap the other levels;
and of the compile steps themselves (Triton kernel + ``torch.compile``, summed over GPUs).

    PYTHONPATH=. python3 benchmarks/compile_step_cost.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any


def one_check(python: str, cache_home: str) -> tuple[float, dict[str, Any]]:
    argv = [python, "-m", "cuda_doctor", "check", "--format", "json"]
    env = {**os.environ, "XDG_CACHE_HOME": cache_home}
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    seconds = time.perf_counter() - start
    try:
        values = json.loads(proc.stdout)["facts"]["values"]
    except (ValueError, KeyError) as exc:
        raise SystemExit(f"check did not print a JSON report ({exc}): {proc.stderr[-2000:]}") from None
    return seconds, values


def compile_figures(values: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    total = 0.0
    said: dict[str, Any] = {
        key: values.get(f"smoke.compile_level.{key}")
        for key in ("status", "compile_cache", "seconds", "import_seconds", "compile_seconds")
    }
    index = 0
    while f"smoke[{index}].step_seconds" in values:
        steps = values[f"smoke[{index}].step_seconds"] or {}
        total += float(steps.get("triton_compile") or 0.0) + float(steps.get("torch_compile") or 0.0)
        said[f"GPU {index}"] = {
            key: (values.get(f"smoke[{index}].{key}"), steps.get(key)) for key in ("triton_compile", "torch_compile")
        }
        index += 1
    return total, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    checks: dict[str, list[float]] = {"new": [], "reused": []}
    steps: dict[str, list[float]] = {"new": [], "reused": []}
    added: dict[str, list[float]] = {"new": [], "reused": []}
    imports: dict[str, list[float]] = {"new": [], "reused": []}
    last: dict[str, Any] = {}
    for _ in range(args.runs):
        cache_home = tempfile.mkdtemp(prefix="compile-step-cost-")
        try:
            for case in ("new", "reused"):
                seconds, values = one_check(args.python, cache_home)
                step, said = compile_figures(values)
                checks[case].append(seconds)
                steps[case].append(step)
                added[case].append(float(said.get("seconds") or 0.0))
                imports[case].append(float(said.get("import_seconds") or 0.0))
                last[case] = said
        finally:
            shutil.rmtree(cache_home, ignore_errors=True)
    summary = {
        case: {
            "check_median_s": round(statistics.median(checks[case]), 2),
            "added_after_framework_level_median_s": round(statistics.median(added[case]), 2),
            "overlapped_imports_median_s": round(statistics.median(imports[case]), 2),
            "compile_step_median_s": round(statistics.median(steps[case]), 2),
            "compile_step_s": [round(s, 2) for s in steps[case]],
            "last_run": last.get(case),
        }
        for case in checks
    }
    print(json.dumps({"runs": args.runs, **summary}, indent=2))


if __name__ == "__main__":
    main()

"""What the GPU smoke run adds to a check.

Times ``cuda-doctor check --format json`` with and without ``--no-smoke`` (alternating, so
warm caches favour neither) and reports the difference, the smoke run's own time, and the
part of it that is not the framework import in the smoke child.  Target on an H200: the
smoke run adds at most 3 s beyond the framework import.

    PYTHONPATH=. python3 benchmarks/smoke_cost.py --runs 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any


def one_check(smoke: bool, python: str) -> tuple[float, dict[str, Any]]:
    argv = [python, "-m", "cuda_doctor", "check", "--format", "json"]
    if not smoke:
        argv.append("--no-smoke")
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    seconds = time.perf_counter() - start
    try:
        values = json.loads(proc.stdout)["facts"]["values"]
    except (ValueError, KeyError) as exc:
        raise SystemExit(f"check did not print a JSON report ({exc}): {proc.stderr[-2000:]}") from None
    return seconds, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    one_check(False, args.python)  # warm the page cache for the framework import
    without: list[float] = []
    with_smoke: list[float] = []
    smoke_seconds: list[float] = []
    child_imports: list[float] = []
    status: object = None
    detail: dict[str, object] = {}
    for _ in range(args.runs):
        seconds, _values = one_check(False, args.python)
        without.append(seconds)
        seconds, values = one_check(True, args.python)
        with_smoke.append(seconds)
        smoke_seconds.append(float(values.get("smoke.seconds") or 0.0))
        child_imports.append(float(values.get("smoke.framework_level.import_seconds") or 0.0))
        status = values.get("smoke.status")
        detail = {
            "driver_level_s": values.get("smoke.driver_level.seconds"),
            "framework_level_s": values.get("smoke.framework_level.seconds"),
            "cuda_init_s": values.get("smoke.framework_level.cuda_init_seconds"),
            **{
                f"gpu{i}_steps_s": values.get(f"smoke[{i}].step_seconds")
                for i in range(int(values.get("smoke.device_count") or 0))
            },
        }
    added = statistics.median(with_smoke) - statistics.median(without)
    beyond_import = added - statistics.median(child_imports)
    print(
        json.dumps(
            {
                "runs": args.runs,
                "check_without_smoke_s": [round(s, 2) for s in without],
                "check_with_smoke_s": [round(s, 2) for s in with_smoke],
                "smoke_status": status,
                "smoke_seconds": smoke_seconds,
                "smoke_child_torch_import_s": child_imports,
                "last_run_detail": detail,
                "added_by_smoke_s": round(added, 2),
                "added_beyond_framework_import_s": round(beyond_import, 2),
                "target_s": 3.0,
                "within_target": beyond_import <= 3.0,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

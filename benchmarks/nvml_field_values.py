"""Per-function NVML reads against one ``nvmlDeviceGetFieldValues`` round trip, on a real GPU.

Before the GPU probe reads per-GPU facts through field values, this says whether that is
faster, first ask (in a fresh process, where NVML is slow) and later asks, and whether both ways
give the same values.  Each round is a new interpreter reading one way, the two ways in turn.

Usage: python benchmarks/nvml_field_values.py [--rounds 7] [--warm 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, statistics, sys, time
import pynvml as nv
from cuda_doctor.gpu.nvml import binding
way, warm = sys.argv[1], int(sys.argv[2])
nv.nvmlInit()
FIELDS = [nv.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, nv.NVML_FI_DEV_RETIRED_PENDING, nv.NVML_FI_DEV_REMAPPED_PENDING,
          nv.NVML_FI_DEV_REMAPPED_FAILURE, nv.NVML_FI_DEV_POWER_INSTANT]
def one_by_one(h):
    asks = [lambda: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC),
            lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(h),
            lambda: nv.nvmlDeviceGetRemappedRows(h)[2:4],
            lambda: nv.nvmlDeviceGetPowerUsage(h)]
    return [_try(ask) for ask in asks]
def _try(ask):
    try:
        return ask()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
def batched(h):
    return [v if not isinstance(v, binding.Refusal) else v.reason for v in binding.field_values(nv, h, FIELDS)]
out = {}
for i in range(nv.nvmlDeviceGetCount()):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    read = one_by_one if way == "one_by_one" else batched
    t = time.perf_counter(); values = read(h); cold = time.perf_counter() - t
    times = []
    for _ in range(warm):
        t = time.perf_counter(); read(h); times.append(time.perf_counter() - t)
    out[i] = {way: {"cold_ms": cold * 1e3, "warm_us": statistics.median(times) * 1e6, "values": repr(values)}}
nv.nvmlShutdown()
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warm", type=int, default=200)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rows: dict[str, dict[str, list[dict[str, object]]]] = {}
    for round_ in range(args.rounds):
        for way in ("one_by_one", "batched") if round_ % 2 == 0 else ("batched", "one_by_one"):
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, way, str(args.warm)], env=env, capture_output=True, text=True, check=False
            )
            if proc.returncode != 0:
                sys.exit(f"NVML could not be read here: {proc.stderr.strip().splitlines()[-1:]}")
            for gpu, ways in json.loads(proc.stdout).items():
                for name, result in ways.items():
                    rows.setdefault(gpu, {}).setdefault(name, []).append(result)
    print(f"python {sys.version.split()[0]} on {os.uname().nodename}, {args.rounds} fresh processes each, medians")
    for gpu, ways in rows.items():
        for way, results in ways.items():
            cold = statistics.median(float(str(r["cold_ms"])) for r in results)
            warm = statistics.median(float(str(r["warm_us"])) for r in results)
            print(f"GPU {gpu} {way:<11} first ask {cold:7.3f} ms   later {warm:8.1f} us   {results[0]['values']}")


if __name__ == "__main__":
    main()

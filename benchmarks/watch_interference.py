"""Does sampling slow a CPU-bound command?  The command under `watch`, next to `nvidia-smi -l 1`
(NVIDIA's own poller, at the same 1 s cadence), and alone; interleaved, medians.

    python benchmarks/watch_interference.py [--repeats 5]

If the command slows as much next to nvidia-smi as under watch, the cost is the driver's
answer to NVML queries, not cuda-doctor's sampler.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = "import time\nt=time.perf_counter(); n=0\nwhile n < 30_000_000: n += 1\nprint(f'{time.perf_counter()-t:.3f}')\n"


def loop_seconds(prefix: list[str]) -> float:
    out = subprocess.run([*prefix, sys.executable, "-c", LOOP], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    watch = [sys.executable, "-m", "cuda_doctor", "watch", "--"]
    slow_watch = [sys.executable, "-m", "cuda_doctor", "watch", "--interval", "5", "--"]
    times: dict[str, list[float]] = {"alone": [], "watch 1 s": [], "watch 5 s": [], "nvidia-smi -l 1": []}
    for _ in range(args.repeats):
        times["alone"].append(loop_seconds([]))
        times["watch 1 s"].append(loop_seconds(watch))
        times["watch 5 s"].append(loop_seconds(slow_watch))
        poller = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu,power.draw", "--format=csv", "-l", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        try:
            times["nvidia-smi -l 1"].append(loop_seconds([]))
        finally:
            poller.terminate()
            poller.wait()
    base = statistics.median(times["alone"])
    for label, values in times.items():
        mid = statistics.median(values)
        print(f"{label:<16} loop {mid:.3f} s  ({mid / base:.2f}× alone)  runs {', '.join(f'{v:.3f}' for v in values)}")


if __name__ == "__main__":
    main()

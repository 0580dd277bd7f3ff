"""What `cuda-doctor watch` costs: the sampler's CPU time at the default interval, and the wall
time it adds to a command (and whether it slows a CPU-bound child).

    python benchmarks/watch_overhead.py [--seconds 10] [--fake]

Uses the real NVML when it initialises (on a GPU machine), else a stand-in that answers instantly
(the CPU cost then is the sampler's own bookkeeping, without the driver's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cuda_doctor.watch.sampler import DEFAULT_INTERVAL_S, Sampler  # noqa: E402

LOOP = (
    "import time\n"
    "t=time.perf_counter(); n=0\n"
    "while n < 30_000_000: n += 1\n"
    "print(f'loop {time.perf_counter()-t:.3f}')\n"
)


class StandInNvml:
    """Answers like one idle GPU, instantly."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return "GPU-00000000-0000-0000-0000-000000000000"

    def nvmlDeviceGetName(self, h: int) -> str:
        return "stand-in"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(total=80 << 30, used=1 << 30, free=79 << 30)

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return 700_000

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=50, memory=20)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 300_000

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return 0

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        return 1000

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 40

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return []


def sampler_cost(seconds: float, fake: bool) -> None:
    nvml: Any = StandInNvml() if fake else None
    if nvml is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            pynvml.nvmlShutdown()
        except Exception as exc:
            print(f"real NVML unavailable ({exc}); using the stand-in")
            nvml = StandInNvml()
    proc = subprocess.Popen(["sleep", str(seconds)])
    sampler = Sampler(proc.pid, interval=DEFAULT_INTERVAL_S, nvml=nvml)
    cpu0 = time.process_time()
    sampler.start()
    proc.wait()
    series = sampler.stop()
    process_cpu = time.process_time() - cpu0
    share = (series.sampler_cpu_s or 0.0) / series.duration_s * 100
    print(
        f"sampler CPU ({'stand-in' if isinstance(nvml, StandInNvml) else 'real'} NVML, "
        f"{len(series.gpus)} GPU(s), interval {DEFAULT_INTERVAL_S:g} s, "
        f"{series.duration_s:.1f} s): "
        f"{series.sampler_cpu_s:.4f} s in the sampler threads = {share:.3f}% of one core "
        f"(whole process {process_cpu:.4f} s); {len(series.samples)} samples"
    )


def _timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, out.stdout


def wall_overhead(repeats: int) -> None:
    watch = [sys.executable, "-m", "cuda_doctor", "watch", "--"]
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + env_path if env_path else "")
    for label, argv in (("sleep 2", ["sleep", "2"]), ("python loop", [sys.executable, "-c", LOOP])):
        plain, watched = [], []
        for _ in range(repeats):  # interleaved, so that drift (clocks, caches) favours neither
            plain.append(_timed(argv))
            watched.append(_timed(watch + argv))
        p = statistics.median(t for t, _ in plain)
        w = statistics.median(t for t, _ in watched)
        line = f"wall {label}: plain {p:.3f} s, under watch {w:.3f} s, added {w - p:+.3f} s"
        if label == "python loop":
            inner_p = statistics.median(float(o.split()[-1]) for _, o in plain)
            inner_w = statistics.median(float(o.split()[-1]) for _, o in watched)
            line += f"; the loop itself {inner_p:.3f} s vs {inner_w:.3f} s under watch"
        print(line + f" (median of {repeats})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fake", action="store_true", help="use the stand-in NVML")
    args = parser.parse_args()
    sampler_cost(args.seconds, args.fake)
    wall_overhead(args.repeats)


if __name__ == "__main__":
    main()

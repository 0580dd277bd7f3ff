"""Where `cuda-doctor check --fast` spends its time, next to its reference.

Prints, for this machine:
  1. interpreter start-up and each reference import alone (medians of N fresh processes);
  2. the slowest imports of the fast check (`python -X importtime`), and our own modules' total;
  3. NVML itself: init, each per-GPU query, all GPUs one after another and side by side;
  4. a cProfile of one fast check, in-process (after its imports), by cumulative time.

Usage: python benchmarks/fast_profile.py [--runs 11]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def startup(env: dict[str, str], runs: int) -> None:
    py = sys.executable
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "import pynvml": [py, "-c", "import pynvml"],
        "import click": [py, "-c", "import click"],
        "import rich": [py, "-c", "import rich"],
        "reference (pynvml, click, rich)": [py, "-c", "import pynvml, click, rich"],
        "cuda-doctor --version": [py, "-m", "cuda_doctor", "--version"],
        "check --fast --format json": [py, "-m", "cuda_doctor", "check", "--fast", "--format", "json"],
        "check --fast (text)": [py, "-m", "cuda_doctor", "check", "--fast"],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):  # interleaved, so that drift hits every case alike
        for name, argv in cases.items():
            start = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times[name].append(time.perf_counter() - start)
    print(f"== 1. fresh processes ({runs} runs, median ms)")
    for name, values in times.items():
        print(f"  {name:<36} {statistics.median(values) * 1000:7.1f}")


def import_times(env: dict[str, str]) -> None:
    argv = [sys.executable, "-X", "importtime", "-m", "cuda_doctor", "check", "--fast", "--format", "json"]
    rows = []
    for _ in range(3):  # keep the last: warm file cache
        err = subprocess.run(argv, env=env, capture_output=True, text=True, check=False).stderr
        rows = []
        for line in err.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            _, self_us, cumulative_us, name = (part.strip() for part in line.replace("import time:", "|").split("|"))
            rows.append((int(self_us), int(cumulative_us), name))
    ours = sum(s for s, _, n in rows if n.strip().startswith("cuda_doctor"))
    total = sum(s for s, _, _ in rows)
    print(f"\n== 2. imports of check --fast: {total / 1000:.1f} ms in all, cuda_doctor.* self {ours / 1000:.1f} ms")
    for self_us, cumulative_us, name in sorted(rows, key=lambda r: -r[0])[:25]:
        print(f"  self {self_us / 1000:6.2f}  cumulative {cumulative_us / 1000:6.2f}  {name.strip()}")


def nvml_calls() -> None:
    print("\n== 3. NVML")
    try:
        import pynvml as nv
    except ImportError as exc:
        print(f"  no pynvml: {exc}")
        return
    start = time.perf_counter()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        print(f"  nvmlInit failed: {exc}")
        return
    print(f"  nvmlInit {(time.perf_counter() - start) * 1000:.1f} ms")
    count = nv.nvmlDeviceGetCount()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    calls = {
        "name": lambda h: nv.nvmlDeviceGetName(h),
        "uuid": lambda h: nv.nvmlDeviceGetUUID(h),
        "brand": lambda h: nv.nvmlDeviceGetBrand(h),
        "pci": lambda h: nv.nvmlDeviceGetPciInfo(h),
        "cc": lambda h: nv.nvmlDeviceGetCudaComputeCapability(h),
        "memory v2": lambda h: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2),
        "ecc mode": lambda h: nv.nvmlDeviceGetEccMode(h),
        "ecc errors": lambda h: nv.nvmlDeviceGetTotalEccErrors(h, 1, 0),
        "retired pending": lambda h: nv.nvmlDeviceGetRetiredPagesPendingStatus(h),
        "remapped rows": lambda h: nv.nvmlDeviceGetRemappedRows(h),
        "persistence": lambda h: nv.nvmlDeviceGetPersistenceMode(h),
        "mig": lambda h: nv.nvmlDeviceGetMigMode(h),
        "pcie gen cur": lambda h: nv.nvmlDeviceGetCurrPcieLinkGeneration(h),
        "pcie gen max": lambda h: nv.nvmlDeviceGetMaxPcieLinkGeneration(h),
        "pcie width cur": lambda h: nv.nvmlDeviceGetCurrPcieLinkWidth(h),
        "pcie width max": lambda h: nv.nvmlDeviceGetMaxPcieLinkWidth(h),
        "clock reasons": lambda h: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
        "temperature": lambda h: nv.nvmlDeviceGetTemperature(h, 0),
        "power": lambda h: nv.nvmlDeviceGetPowerUsage(h),
        "power limit": lambda h: nv.nvmlDeviceGetEnforcedPowerLimit(h),
        "processes": lambda h: nv.nvmlDeviceGetComputeRunningProcesses(h),
    }

    def one_gpu(handle: object) -> None:
        for call in calls.values():
            with contextlib.suppress(nv.NVMLError):  # not supported on this board: timed all the same
                call(handle)

    for name, call in calls.items():
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            try:
                call(handles[0])
            except nv.NVMLError as exc:
                name = f"{name} ({exc})"
            samples.append(time.perf_counter() - start)
        print(f"  {name:<28} {statistics.median(samples) * 1000:6.2f} ms")
    import threading

    for label, threaded in (("one after another", False), ("side by side", True)):
        start = time.perf_counter()
        if threaded:
            threads = [threading.Thread(target=one_gpu, args=(h,)) for h in handles]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for h in handles:
                one_gpu(h)
        print(f"  all {count} GPU(s) {label}: {(time.perf_counter() - start) * 1000:.1f} ms")
    start = time.perf_counter()
    nv.nvmlShutdown()
    print(f"  nvmlShutdown {(time.perf_counter() - start) * 1000:.1f} ms")


COLD = r"""
import sys, time, threading
mode = sys.argv[1]
t0 = time.perf_counter()
if mode == "early":  # what cuda-doctor's entry does: the C library starts while pynvml imports
    from cuda_doctor.gpu.nvml.early_open import open_driver_early
    open_driver_early()
import pynvml as nv
t_import = time.perf_counter()
nv.nvmlInit()
t_init = time.perf_counter()
count = nv.nvmlDeviceGetCount()
names = ["nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetBrand", "nvmlDeviceGetPciInfo",
         "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetEccMode",
         "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetRemappedRows",
         "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetMigMode", "nvmlDeviceGetCurrPcieLinkGeneration",
         "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
         "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage",
         "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetComputeRunningProcesses"]
args = {"nvmlDeviceGetTotalEccErrors": (1, 0), "nvmlDeviceGetTemperature": (0,)}
costs = {}
def call(handle, name, gpu):
    start = time.perf_counter()
    try:
        getattr(nv, name)(handle, *args.get(name, ()))
    except nv.NVMLError:
        pass
    costs[(gpu, name)] = time.perf_counter() - start
def gpu(i):
    start = time.perf_counter()
    handle = nv.nvmlDeviceGetHandleByIndex(i)
    costs[(i, "nvmlDeviceGetHandleByIndex")] = time.perf_counter() - start
    if mode == "per-call":
        threads = [threading.Thread(target=call, args=(handle, n, i)) for n in names]
        [t.start() for t in threads]; [t.join() for t in threads]
    else:
        for n in names:
            call(handle, n, i)
if mode == "sequential":
    for i in range(count):
        gpu(i)
else:
    threads = [threading.Thread(target=gpu, args=(i,)) for i in range(count)]
    [t.start() for t in threads]; [t.join() for t in threads]
t_read = time.perf_counter()
nv.nvmlShutdown()
t_end = time.perf_counter()
print(f"{mode:<11} import {1e3*(t_import-t0):6.1f}  init {1e3*(t_init-t_import):5.1f}  "
      f"read {1e3*(t_read-t_init):5.1f}  shutdown {1e3*(t_end-t_read):5.1f} ms")
if mode == "sequential":
    slow = sorted(costs.items(), key=lambda kv: -kv[1])[:8]
    print("   slowest first calls: " + ", ".join(f"GPU{g} {n[13:]} {1e3*c:.1f}" for (g, n), c in slow))
"""


def cold_nvml(env: dict[str, str]) -> None:
    print("\n== 3b. NVML in fresh processes (first calls are the slow ones)")
    for _ in range(2):
        for mode in ("sequential", "per-gpu", "per-call", "early"):
            out = subprocess.run([sys.executable, "-c", COLD, mode], env=env, capture_output=True, text=True)
            print("  " + (out.stdout.strip() or out.stderr.strip()[-300:]).replace("\n", "\n  "))


def profile() -> None:
    sys.path.insert(0, str(REPO))
    from cuda_doctor.cli import main
    from cuda_doctor.commands import check  # noqa: F401  (imports paid before profiling)

    profiler = cProfile.Profile()
    sink = io.StringIO()
    stdout = sys.stdout
    sys.stdout = sink
    profiler.enable()
    try:
        with contextlib.suppress(SystemExit):  # the exit status is the check's verdict
            main(["check", "--fast", "--format", "json"])
    finally:
        profiler.disable()
        sys.stdout = stdout
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(35)
    stats.sort_stats("tottime").print_stats(20)
    print("\n== 4. cProfile of one check --fast (in-process, after imports)")
    print(text.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    import compileall

    compileall.compile_dir(str(REPO / "cuda_doctor"), quiet=1)
    print(f"python {sys.version.split()[0]} on {os.uname().nodename}")
    startup(env, args.runs)
    import_times(env)
    nvml_calls()
    cold_nvml(env)
    profile()


if __name__ == "__main__":
    main()

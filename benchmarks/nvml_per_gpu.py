"""What each GPU adds to the GPU probe's NVML read, on a real machine: the marginal cost per GPU
in ms and the driver round trips per GPU, for the fast check's read and the full one; and
whether the NVLink field values say what the per-link functions say.

Each sample is a fresh interpreter that imports the binding, then times one read of the first k
GPUs exactly as the probe reads them (``collect_nvml``: init, every GPU on its own thread,
shutdown), NVML's first asks being the slow ones.  NVML cannot be told to see fewer GPUs
(CUDA_VISIBLE_DEVICES does not apply to it), so the child's binding answers ``nvmlDeviceGetCount``
with k and counts every call it passes on.  The marginal cost is the least-squares slope of the
median read time over k = 1…N; on one GPU only the read itself is printed.

Usage: python benchmarks/nvml_per_gpu.py [--rounds 5]
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
import json, os, sys, time
from pathlib import Path
import pynvml
from cuda_doctor.gpu.nvml.read import collect_nvml
from cuda_doctor.core.probe import ProbeContext
limit, fast = int(sys.argv[1]), sys.argv[2] == "fast"
calls = {}
class Counted:
    def __getattr__(self, name):
        real = getattr(pynvml, name)
        if not name.startswith("nvml") or not callable(real):
            return real
        def call(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            if name == "nvmlDeviceGetCount":
                return min(limit, real())
            return real(*args, **kwargs)
        return call
ctx = ProbeContext(root=Path("/"), env=dict(os.environ), timeout=60.0, fast=fast)
start = time.perf_counter()
facts = collect_nvml(ctx, Counted())
seconds = time.perf_counter() - start
system = {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount"}
per_gpu = {k: v for k, v in calls.items() if k not in system and not k.startswith("nvmlSystem")}
print(json.dumps({"seconds": seconds, "gpus": facts.get("gpu.count"), "calls": per_gpu,
                  "unknown": sorted(n for n in facts.unknown if n.startswith("gpu[")),
                  "status": facts.get("driver.status"), "error": facts.get("driver.error")}))
"""

LINKS = r"""
import json
import pynvml as nv
nv.nvmlInit()
FI = {"replay": nv.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY, "recovery": nv.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY,
      "crc": nv.NVML_FI_DEV_NVLINK_ERROR_DL_CRC, "state": nv.NVML_FI_DEV_NVLINK_GET_STATE}
COUNTERS = {"replay": (nv.NVML_NVLINK_ERROR_DL_REPLAY,), "recovery": (nv.NVML_NVLINK_ERROR_DL_RECOVERY,),
            "crc": (nv.NVML_NVLINK_ERROR_DL_CRC_FLIT, nv.NVML_NVLINK_ERROR_DL_CRC_DATA)}
def ask(f, *a):
    try:
        return f(*a)
    except nv.NVMLError as exc:
        return f"ERR {exc}"
def counter(h, link, kinds):
    answers = [ask(nv.nvmlDeviceGetNvLinkErrorCounter, h, link, c) for c in kinds]
    bad = [a for a in answers if not isinstance(a, int)]
    return bad[0] if bad else sum(answers)
out = []
for i in range(nv.nvmlDeviceGetCount()):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    (count,) = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_NVLINK_LINK_COUNT])
    links = int(count.value.uiVal) if count.nvmlReturn == 0 else 0
    out.append({"gpu": i, "link_count_field": links if count.nvmlReturn == 0 else f"ERR {count.nvmlReturn}",
                "state_link0_function": ask(nv.nvmlDeviceGetNvLinkState, h, 0)})
    for link in range(links):
        asked = [(f, link) for f in FI.values()]
        got = nv.nvmlDeviceGetFieldValues(h, asked)
        fields = {k: (int(e.value.ullVal) if k != "state" else int(e.value.uiVal)) if e.nvmlReturn == 0
                  else f"ERR {e.nvmlReturn}" for k, e in zip(FI, got)}
        functions = {k: counter(h, link, kinds) for k, kinds in COUNTERS.items()}
        functions["state"] = ask(nv.nvmlDeviceGetNvLinkState, h, link)
        out.append({"gpu": i, "link": link, "fields": fields, "functions": functions})
nv.nvmlShutdown()
print(json.dumps(out))
"""


def child(args: list[str], code: str = CHILD) -> dict[str, object] | list[object]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"NVML could not be read here: {proc.stderr.strip().splitlines()[-1:]}")
    result: dict[str, object] | list[object] = json.loads(proc.stdout)
    return result


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of y over x."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)


def measure(mode: str, gpus: int, rounds: int) -> None:
    medians: list[tuple[int, float]] = []
    last: dict[str, object] = {}
    for k in range(1, gpus + 1):
        samples = []
        for _ in range(rounds):
            result = child([str(k), mode])
            assert isinstance(result, dict)
            samples.append(float(str(result["seconds"])))
            last = result
        medians.append((k, statistics.median(samples) * 1e3))
        print(f"  {mode:<4} {k} GPU{'s' if k > 1 else ' '}  read {medians[-1][1]:7.2f} ms (median of {rounds})")
    calls = last["calls"]
    assert isinstance(calls, dict)
    per_gpu = sum(int(v) for v in calls.values()) / gpus
    each = ", ".join(f"{name} {int(n) / gpus:g}" for name, n in calls.items())
    print(f"  {mode:<4} driver round trips per GPU: {per_gpu:g}  ({each})")
    unknown = last.get("unknown")
    if isinstance(unknown, list) and unknown:
        names = sorted({str(name).split("].", 1)[-1] for name in unknown})
        print(f"  {mode:<4} left unknown on some GPUs: {', '.join(names)}")
    if len(medians) > 1:
        print(f"  {mode:<4} marginal cost per GPU: {slope(medians):.2f} ms (slope over 1-{gpus} GPUs)")


def compare_links() -> None:
    rows = child([], LINKS)
    assert isinstance(rows, list)
    differ = 0
    for row in rows:
        assert isinstance(row, dict)
        if "link" not in row:
            count, state = row["link_count_field"], row["state_link0_function"]
            print(f"  GPU {row['gpu']}: NVLink count field {count}, link 0 state by function {state}")
            continue
        fields, functions = row["fields"], row["functions"]
        assert isinstance(fields, dict) and isinstance(functions, dict)
        same = all(str(fields[k]) == str(functions[k]) for k in ("replay", "recovery", "crc"))
        state_ok = isinstance(fields["state"], int) and isinstance(functions["state"], int)
        if not same or not state_ok:
            differ += 1
            print(f"  GPU {row['gpu']} link {row['link']}: fields {fields} functions {functions}")
    print(f"  NVLink counters: fields and functions differ on {differ} link(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    probe = child(["1024", "fast"])
    assert isinstance(probe, dict)
    gpus = probe.get("gpus")
    if not isinstance(gpus, int) or gpus < 1:
        sys.exit(f"no GPU read through NVML here: {probe.get('status')}: {probe.get('error')}")
    print(f"python {sys.version.split()[0]} on {os.uname().nodename}, {gpus} GPU(s), fresh interpreter per read")
    for mode in ("fast", "full"):
        measure(mode, gpus, args.rounds)
    compare_links()


if __name__ == "__main__":
    main()

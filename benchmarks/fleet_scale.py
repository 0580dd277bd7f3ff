"""How long `cuda-doctor fleet` takes to read and compare N node reports.

Generates N realistic 8-GPU H200 node reports (facts shaped like the recorded H200 machine,
per-GPU NVML facts, smoke figures with run-to-run wobble, 40 rule results; a few nodes with
another driver, a slow GPU or a failing rule) as files in a temporary directory, then times
loading + comparing, and rendering the text and JSON output, for each N.

    python benchmarks/fleet_scale.py            # N = 100, 1000, 10000
    python benchmarks/fleet_scale.py 100 1000
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cuda_doctor.compare.fleet import compare_fleet
from cuda_doctor.report.compare import json as compare_json
from cuda_doctor.report.compare import text as compare_text
from cuda_doctor.reportfile import load_many

GPUS = 8
# The recorded H200 (torch 2.11.0+cu130, driver 580.159.04) figures.
FIGURES = {
    "bf16_tflops": 768.6,
    "fp16_tflops": 734.9,
    "fp32_tflops": 51.0,
    "h2d_pinned_gbps": 55.2,
    "h2d_pageable_gbps": 18.1,
    "d2h_pinned_gbps": 53.0,
    "launch_us": 7.64,
}


def node_report(i: int, rng: random.Random) -> dict[str, Any]:
    host = f"node{i:05d}"
    driver, cuda = ("570.195.03", "12.8") if i % 97 == 3 else ("580.159.04", "13.0")
    v: dict[str, Any] = {
        "driver.status": "ok",
        "driver.source": "nvml",
        "driver.version": driver,
        "driver.cuda_version": cuda,
        "gpu.count": GPUS,
        "torch.installed": True,
        "torch.version": "2.11.0+cu130",
        "torch.cuda_build": "13.0",
        "torch.cudnn_version": 91900,
        "torch.nccl_version": "2.28.9",
        "torch.device_names": ["NVIDIA H200"] * GPUS,
        "container.cuda_version": "13.0.2",
        "system.hostname": host,
        "smoke.status": "ok",
        "env.nccl": {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5"},
    }
    for g in range(GPUS):
        p = f"gpu[{g}]."
        v.update(
            {
                p + "index": g,
                p + "name": "NVIDIA H200",
                p + "uuid": f"GPU-{i:08x}-{g:04x}",
                p + "pci_bus_id": f"00000000:{g:02x}:00.0",
                p + "compute_capability": "9.0",
                p + "memory_total_mib": 143771,
                p + "memory_used_mib": 0,
                p + "ecc_enabled": True,
                p + "ecc_uncorrected_volatile": 0,
                p + "retired_pages_pending": False,
                p + "remapped_rows_pending": False,
                p + "remapped_rows_failure": False,
                p + "persistence_mode": True,
                p + "mig_enabled": False,
                p + "pcie_gen_current": 5,
                p + "pcie_gen_max": 5,
                p + "pcie_width_current": 16,
                p + "pcie_width_max": 16,
                p + "clock_event_reasons": 1,
                p + "clock_event_reason_names": ["gpu_idle"],
                p + "temperature_c": 36,
                p + "power_w": 78.0,
                p + "power_limit_w": 700.0,
                p + "processes": [],
                p + "process_count": 0,
            }
        )
        slow = 0.6 if i % 211 == 7 and g == 5 else 1.0
        s = f"smoke[{g}]."
        for key, value in FIGURES.items():
            v[s + key] = round(value * slow * rng.gauss(1.0, 0.01), 3)
        for key in ("vector_add_ok", "matmul_ok", "conv_ok", "amp_step_ok"):
            v[s + key] = True
    results = [
        {
            "rule": f"CD{100 + r}",
            "title": f"Check {r}",
            "category": "driver",
            "status": "fail" if (r == 7 and i % 153 == 0) else "pass",
            "subject": None,
            "message": "a message of ordinary length for a rule outcome",
            "fix": None,
            "commands": [],
            "links": ["https://docs.nvidia.com/deploy/cuda-compatibility/"],
            "evidence": {"driver.version": driver},
        }
        for r in range(40)
    ]
    return {
        "schema": "cuda-doctor/report",
        "schema_version": 1,
        "tool": {"name": "cuda-doctor", "version": "0.1.0"},
        "host": host,
        "created": "2026-11-29T10:00:00+00:00",
        "command": "check",
        "facts": {"values": v, "unknown": {"tensorflow.version": "not installed"}},
        "results": results,
        "summary": {"pass": 40, "exit_code": 0},
    }


def run(n: int) -> dict[str, float]:
    rng = random.Random(n)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        directory = Path(tmp)
        size = 0
        for i in range(n):
            text = json.dumps(node_report(i, rng), indent=2)
            size += len(text)
            (directory / f"node{i:05d}.json").write_text(text)
        start = time.perf_counter()
        reports, errors = load_many([directory])
        loaded = time.perf_counter()
        fleet = compare_fleet(reports, errors)
        compared = time.perf_counter()
        compare_text.render_fleet(fleet)
        compare_json.render_fleet(fleet)
        rendered = time.perf_counter()
    if len(fleet.nodes) != n or fleet.errors:
        raise SystemExit(f"expected {n} readable reports, got {len(fleet.nodes)}: {fleet.errors[:3]}")
    return {
        "mb": size / 1e6,
        "load": loaded - start,
        "compare": compared - loaded,
        "total": compared - start,
        "render": rendered - compared,
        "differing": len(fleet.differing),
        "outliers": len(fleet.outliers),
    }


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [100, 1000, 10000]
    print(
        f"{'N':>6} {'MB':>7} {'load s':>8} {'compare s':>10} {'load+cmp s':>11} "
        f"{'render s':>9} {'differ':>7} {'outliers':>9}"
    )
    for n in sizes:
        r = run(n)
        print(
            f"{n:>6} {r['mb']:>7.1f} {r['load']:>8.3f} {r['compare']:>10.3f} {r['total']:>11.3f} "
            f"{r['render']:>9.3f} {r['differing']:>7.0f} {r['outliers']:>9.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])

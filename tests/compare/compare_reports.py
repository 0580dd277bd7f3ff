"""Report dicts for comparison tests, built from the H200 recordings in fixtures/.

``base_report()`` parses the recorded torch and nvidia-smi output, so its facts and smoke
figures are what that machine really printed; the variants change one thing each.
"""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"


def _recorded() -> dict[str, Any]:
    torch_txt = (FIXTURES / "h200-torch.txt").read_text()
    with (FIXTURES / "h200-query-gpu.csv").open() as fh:
        rows = [{k.strip(): v.strip() for k, v in row.items()} for row in csv.DictReader(fh)]
    head = re.search(r"^torch (\S+) cuda (\S+)", torch_txt, re.M)
    libs = re.search(r"^cudnn (\d+) nccl \((\d+), (\d+), (\d+)\)", torch_txt, re.M)
    assert head and libs, "the torch recording changed shape"

    def tflops(dtype: str) -> float:
        m = re.search(rf"torch\.{dtype} matmul 4096 ms \S+ TFLOPs (\S+)", torch_txt)
        assert m, dtype
        return round(float(m.group(1)), 1)

    def rate(label: str) -> float:
        m = re.search(rf"^{label} (\S+)", torch_txt, re.M)
        assert m, label
        return round(float(m.group(1)), 2)

    return {
        "gpu_rows": rows,
        "torch_version": head.group(1),
        "torch_cuda": head.group(2),
        "cudnn": int(libs.group(1)),
        "nccl": ".".join(libs.group(i) for i in (2, 3, 4)),
        "bf16": tflops("bfloat16"),
        "fp16": tflops("float16"),
        "fp32": tflops("float32"),
        "h2d_pinned": rate("H2D pinned GB/s"),
        "h2d_pageable": rate("H2D pageable GB/s"),
        "launch": rate("launch_us"),
    }


RECORDED = _recorded()


def _result(
    rule: str, title: str, category: str, status: str, message: str, subject: str | None = None
) -> dict[str, Any]:
    return {
        "rule": rule,
        "title": title,
        "category": category,
        "status": status,
        "subject": subject,
        "message": message,
        "fix": None,
        "commands": [],
        "links": [],
        "evidence": {},
    }


def base_report(host: str = "gpu-node-01", gpus: int = 1) -> dict[str, Any]:
    """A schema-1 report of the recorded H200 machine (``gpus`` copies of its GPU)."""
    rec = RECORDED
    row = rec["gpu_rows"][0]
    driver = row["driver_version"]
    values: dict[str, Any] = {
        "driver.status": "ok",
        "driver.error": None,
        "driver.source": "nvml",
        "driver.version": driver,
        "driver.cuda_version": "13.0",
        "nvml.version": f"13.{driver}",
        "gpu.count": gpus,
        "framework.python": "/usr/bin/python3",
        "framework.python_version": "3.12.3",
        "torch.installed": True,
        "torch.version": rec["torch_version"],
        "torch.version_base": rec["torch_version"].split("+")[0],
        "torch.cuda_build": rec["torch_cuda"],
        "torch.cuda_available": True,
        "torch.cuda_error": None,
        "torch.device_count": gpus,
        "torch.device_names": [row["name"]] * gpus,
        "torch.device_capabilities": [row["compute_cap"]] * gpus,
        "torch.cudnn_version": rec["cudnn"],
        "torch.nccl_version": rec["nccl"],
        "torch.bf16_native": True,
        "tensorflow.installed": False,
        "container.detected": True,
        "container.runtime": "docker",
        "container.cuda_version": "13.0.2",
        "system.hostname": host,
        "smoke.status": "ok",
        "smoke.error": None,
    }
    for i in range(gpus):
        values.update(
            {
                f"gpu[{i}].index": i,
                f"gpu[{i}].name": row["name"],
                f"gpu[{i}].uuid": row["uuid"][:-1] + str(i),
                f"gpu[{i}].compute_capability": row["compute_cap"],
                f"gpu[{i}].memory_total_mib": 143771,
                f"smoke[{i}].vector_add_ok": True,
                f"smoke[{i}].matmul_ok": True,
                f"smoke[{i}].conv_ok": True,
                f"smoke[{i}].amp_step_ok": True,
                f"smoke[{i}].bf16_tflops": rec["bf16"],
                f"smoke[{i}].fp16_tflops": rec["fp16"],
                f"smoke[{i}].fp32_tflops": rec["fp32"],
                f"smoke[{i}].h2d_pinned_gbps": rec["h2d_pinned"],
                f"smoke[{i}].h2d_pageable_gbps": rec["h2d_pageable"],
                f"smoke[{i}].launch_us": rec["launch"],
            }
        )
    results = [
        _result(
            "CD101",
            "Driver supports the framework's CUDA build",
            "driver",
            "pass",
            f"driver {driver} supports CUDA 13.0",
        ),
        _result(
            "CD201",
            "Framework is a CUDA build",
            "framework",
            "pass",
            f"torch {rec['torch_version']} is built for CUDA {rec['torch_cuda']}",
        ),
        _result(
            "CD310",
            "No pending retired pages",
            "health",
            "pass",
            "no pending pages",
            subject="GPU 0",
        ),
        _result("CD120", "Persistence mode", "driver", "info", "persistence mode is on"),
    ]
    return {
        "schema": "cuda-doctor/report",
        "schema_version": 1,
        "tool": {"name": "cuda-doctor", "version": "0.1.0"},
        "host": host,
        "created": "2026-11-29T10:00:00Z",
        "command": "check",
        "facts": {
            "values": values,
            "unknown": {"tensorflow.version": "tensorflow is not installed"},
        },
        "results": results,
        "summary": {
            "pass": 3,
            "info": 1,
            "warn": 0,
            "fail": 0,
            "unknown": 0,
            "skipped": 0,
            "error": 0,
            "exit_code": 0,
        },
    }


def other_driver(report: dict[str, Any], version: str = "570.195.03", cuda: str = "12.8") -> dict[str, Any]:
    out = copy.deepcopy(report)
    out["facts"]["values"]["driver.version"] = version
    out["facts"]["values"]["driver.cuda_version"] = cuda
    return out


def other_torch(
    report: dict[str, Any], version: str = "2.10.0+cu128", cuda: str = "12.8", nccl: str = "2.27.3"
) -> dict[str, Any]:
    out = copy.deepcopy(report)
    v = out["facts"]["values"]
    v["torch.version"], v["torch.version_base"] = version, version.split("+")[0]
    v["torch.cuda_build"], v["torch.nccl_version"] = cuda, nccl
    return out


def slower_gpu(
    report: dict[str, Any],
    factor: float = 0.7,
    gpu: int = 0,
    metrics: tuple[str, ...] = ("bf16_tflops", "fp16_tflops"),
) -> dict[str, Any]:
    out = copy.deepcopy(report)
    v = out["facts"]["values"]
    for m in metrics:
        v[f"smoke[{gpu}].{m}"] = round(v[f"smoke[{gpu}].{m}"] * factor, 2)
    return out


def scaled(report: dict[str, Any], factor: float) -> dict[str, Any]:
    """Every throughput figure times ``factor`` (a run-to-run wobble when close to 1)."""
    out = copy.deepcopy(report)
    v = out["facts"]["values"]
    for k in list(v):
        if k.startswith("smoke[") and k.endswith(("_tflops", "_gbps")):
            v[k] = round(v[k] * factor, 3)
    return out


def failing_rule(report: dict[str, Any], rule: str = "CD310", status: str = "fail") -> dict[str, Any]:
    out = copy.deepcopy(report)
    for r in out["results"]:
        if r["rule"] == rule:
            r["status"] = status
            r["message"] = "GPU 0 has retired pages pending: reset the GPU or reboot"
    out["summary"]["pass"] -= 1
    out["summary"][status] += 1
    out["summary"]["exit_code"] = 1
    return out


def write(path: Path, report: dict[str, Any]) -> Path:
    path.write_text(json.dumps(report, indent=2))
    return path


def facts_report(report: dict[str, Any]) -> dict[str, Any]:
    """What `cuda-doctor facts --format json` writes: the same facts, no rule results."""
    out = copy.deepcopy(report)
    out["command"] = "facts"
    out["results"] = []
    out["summary"] = {k: 0 for k in out["summary"]}
    return out


def torch_missing(report: dict[str, Any]) -> dict[str, Any]:
    """The framework probe found no torch: ``torch.installed`` False, the rest unknown."""
    out = copy.deepcopy(report)
    values, unknown = out["facts"]["values"], out["facts"]["unknown"]
    for k in [k for k in values if k.startswith("torch.")]:
        del values[k]
        unknown[k] = "torch is not installed"
    values["torch.installed"] = False
    del unknown["torch.installed"]
    return out

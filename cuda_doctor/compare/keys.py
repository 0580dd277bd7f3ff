"""What comparisons look at: the key configuration facts and the smoke-run figures."""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from cuda_doctor.core.reportfile import SavedReport

#: Facts whose change matters after an upgrade, with the label shown to people (gpu.models: see gpu_models()).
KEY_FACTS = {
    "driver.version": "NVIDIA driver", "driver.cuda_version": "CUDA (driver API)", "torch.version": "torch",
    "torch.cuda_build": "torch CUDA build", "torch.cudnn_version": "cuDNN (torch)",
    "torch.nccl_version": "NCCL (torch)", "tensorflow.version": "TensorFlow",
    "container.cuda_version": "container CUDA", "framework.python_version": "Python",
    "gpu.count": "GPU count", "gpu.models": "GPU models",
}  # fmt: skip


@dataclass(frozen=True)
class Metric:
    key: str  # the fact suffix: smoke[i].<key>
    label: str
    unit: str
    higher_is_better: bool


METRICS: tuple[Metric, ...] = (
    Metric("bf16_tflops", "bf16 matmul", "TFLOP/s", True),
    Metric("fp16_tflops", "fp16 matmul", "TFLOP/s", True),
    Metric("fp32_tflops", "fp32 matmul", "TFLOP/s", True),
    Metric("h2d_pinned_gbps", "H2D pinned", "GB/s", True),
    Metric("h2d_pageable_gbps", "H2D pageable", "GB/s", True),
    Metric("d2h_pinned_gbps", "D2H pinned", "GB/s", True),
    Metric("launch_us", "kernel launch", "µs", False),
)

#: Smoke-run pass/fail checks: True → False is a regression.
SMOKE_CHECKS = {
    "vector_add_ok": "vector add",
    "matmul_ok": "matmul",
    "conv_ok": "convolution",
    "amp_step_ok": "AMP training step",
}

_SMOKE_KEYS = tuple(m.key for m in METRICS) + tuple(SMOKE_CHECKS)
_GPU_NAME = re.compile(r"^gpu\[(\d+)\]\.name$")

#: Marker for "this report does not know the fact" (distinct from a known ``None``).
MISSING: Any = object()
#: Marker for a framework fact of a framework the report says is not installed.
NOT_INSTALLED: Any = object()


def gpu_models(report: SavedReport) -> str | None:
    """``"8× NVIDIA H200"`` (or ``"7× NVIDIA H200, 1× NVIDIA H100"``); None when no names."""
    names = [v for k, v in report.values.items() if _GPU_NAME.match(k) and isinstance(v, str)]
    if not names:
        return None
    by_count = sorted(Counter(names).items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{n}× {name}" for name, n in by_count)


def key_fact(report: SavedReport, name: str) -> Any:
    """The value of a key fact, or ``MISSING`` when the report does not know it."""
    if name == "gpu.models":
        models = gpu_models(report)
        return MISSING if models is None else models
    if name in report.values:
        return report.values[name]
    # torch.version unknown because torch.installed is False: say "not installed".
    framework = name.split(".", 1)[0]
    if "." in name and report.values.get(f"{framework}.installed") is False:
        return NOT_INSTALLED
    return MISSING


def smoke_indices(report: SavedReport) -> list[int]:
    """CUDA ordinals with smoke facts: contiguous from 0, so probed index by index."""
    found: list[int] = []
    values = report.values
    while any(key in values for key in smoke_keys(len(found))):
        found.append(len(found))
    return found


@functools.lru_cache(maxsize=1024)
def smoke_keys(gpu: int) -> tuple[str, ...]:
    """``smoke[i].<key>`` of one GPU: the figures in METRICS order, then the checks."""
    return tuple(f"smoke[{gpu}].{key}" for key in _SMOKE_KEYS)


def number(value: Any) -> float | None:
    """A finite number, or None: a saved report may hold anything JSON can, NaN and Infinity too."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def state(value: Any) -> str:
    """Whether a key fact's value is known: "known", "unknown" (``MISSING``) or "not installed"."""
    if value is MISSING:
        return "unknown"
    if value is NOT_INSTALLED:
        return "not installed"
    return "known"


def show(value: Any) -> str:
    """A fact value as people read it."""
    if value is MISSING or value is NOT_INSTALLED:
        return state(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(show(v) for v in value) or "—"
    return str(value)

"""NVML through nvidia-ml-py (module ``pynvml``): ``binding`` to talk to it, ``gpu_facts`` to read
the facts, ``read`` to read them on a thread of their own."""

from __future__ import annotations

from collections.abc import Mapping


def nvml_disabled(env: Mapping[str, str]) -> bool:
    """CUDA_DOCTOR_DISABLE_NVML is set: the GPU probe asks nvidia-smi only."""
    return env.get("CUDA_DOCTOR_DISABLE_NVML", "") not in ("", "0")

"""NVML through nvidia-ml-py (module ``pynvml``).

``binding``: load the binding, open and close NVML, name its errors, decode its strings, ask it.
``gpu_facts``: the ``driver.*``, ``nvml.*`` and ``gpu[i].*`` facts read from an open NVML.
``read``: one read of those facts on its own thread, abandoned when the driver does not answer.
"""

from __future__ import annotations

from collections.abc import Mapping


def nvml_disabled(env: Mapping[str, str]) -> bool:
    """CUDA_DOCTOR_DISABLE_NVML is set: the GPU probe asks nvidia-smi only."""
    return env.get("CUDA_DOCTOR_DISABLE_NVML", "") not in ("", "0")

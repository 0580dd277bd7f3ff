"""Derived facts of the host's environment: NCCL debugging variables, /dev/shm, nvcc, clocks."""

from __future__ import annotations

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.tables.versions import major_minor

#: Debugging variables, not for production: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
NCCL_DEBUG_VARIABLES = (
    "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_P2P_LEVEL", "NCCL_ALGO", "NCCL_PROTO",
    "NCCL_BUFFSIZE", "NCCL_NTHREADS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_CHECKS_DISABLE",
    "NCCL_CHECK_POINTERS", "NCCL_LAUNCH_MODE",
)  # fmt: skip


def derive(facts: Facts) -> None:
    nccl = facts.get("env.nccl")
    if isinstance(nccl, dict):
        left = sorted(k for k in nccl if k in NCCL_DEBUG_VARIABLES and str(nccl[k]).strip())
        facts.set("derived.nccl_debug_vars", [f"{k}={nccl[k]}" for k in left])
        facts.set("derived.nccl_unset_command", "unset " + " ".join(left) if left else None)
    elif not facts.has("env.nccl"):
        facts.mark_unknown("derived.nccl_debug_vars", facts.unknown_reason("env.nccl"))
    shm = facts.get("system.shm_bytes")
    if isinstance(shm, (int, float)):
        facts.set("derived.shm_mib", round(shm / 2**20))
    nvcc = major_minor(facts.get("toolkit.nvcc_version"))
    build = major_minor(facts.get("torch.cuda_build"))
    if nvcc and build:
        facts.set("derived.nvcc_major_differs", nvcc[0] != build[0])
    elif facts.has("toolkit.nvcc_version") and facts.get("toolkit.nvcc_version") is None:
        facts.set("derived.nvcc_major_differs", False)
    for i in facts.indices("gpu"):
        names = facts.get(indexed("gpu", i, "clock_event_reason_names"))
        if isinstance(names, list):
            slow = [n for n in names if n in ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")]
            facts.set(f"derived.gpu[{i}].slowdown_reasons", slow)
    detected, nvidiactl = facts.get("container.detected"), facts.get("container.nvidiactl")
    if isinstance(nvidiactl, str):
        facts.set("derived.container.devices_lost", detected is True and nvidiactl not in ("ok", "missing"))

"""The GPU probe: NVML first, ``nvidia-smi`` when NVML cannot answer in this Python (the driver may still
be fine).  When both fail, the verdict that says more wins; NVML's own reason stays in ``nvml.error``."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from cuda_doctor.base.process import running_pids
from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import nvml_disabled
from cuda_doctor.gpu.nvml.read import collect_nvml

# NVML statuses that nvidia-smi (built on the same NVML) could only repeat.
_DEFINITIVE = {"ok", "no_gpu", "version_mismatch"}


class GpuProbe(NamedTuple):
    """``nvml`` replaces the ``pynvml`` module (tests pass a fake GPU)."""

    name: str = "gpu"
    nvml: Any = None

    def applies(self, ctx: ProbeContext) -> bool:
        return True

    def deadline(self, ctx: ProbeContext) -> float:
        # NVML's read, then nvidia-smi's -q -x, --query-gpu and its retry without an unknown field
        return 4 * ctx.timeout + 5

    def collect(self, ctx: ProbeContext) -> Facts:
        # cuda-doctor's children when the reading starts, and at its end; and this process, which
        # holds a GPU when a training script asks through the API (cuda_doctor.require)
        ours = {os.getpid(), *running_pids()}
        facts = self._collect(ctx)
        leave_out(facts, ours | set(running_pids()))
        return facts

    def _collect(self, ctx: ProbeContext) -> Facts:
        if nvml_disabled(ctx.env):
            # nvidia-smi only: for a broken NVML binding, and for tests that must not read the host's GPU
            facts = _collect_nvidia_smi(ctx)
            facts.set("nvml.error", "NVML disabled by CUDA_DOCTOR_DISABLE_NVML")
            if not facts.has("driver.status"):  # no nvidia-smi either: no driver to talk to
                reason = facts.reason("driver.status") or "nvidia-smi gave no answer"
                facts.set("driver.status", "library_not_found")
                facts.set("driver.error", f"NVML disabled; {reason}")
            return facts
        nvml_facts = collect_nvml(ctx, self.nvml)
        status = nvml_facts.get("driver.status")
        if status in _DEFINITIVE:
            return nvml_facts
        smi_facts = _collect_nvidia_smi(ctx)
        nvml_error = nvml_facts.get("nvml.error") or nvml_facts.get("driver.error")
        smi_status = smi_facts.get("driver.status")
        # nvidia-smi's verdict wins unless it says less; one that printed something shows a driver
        answered = smi_facts.has("driver.smi_notes")
        if smi_status is not None and (answered or not _less_specific(smi_status, status)):
            smi_facts.set("nvml.error", nvml_error)
            return smi_facts
        smi_reason = (
            smi_facts.get("driver.error") or smi_facts.unknown.get("driver.status") or "nvidia-smi gave no answer"
        )
        merged = nvml_facts.copy()
        merged.set("driver.error", f"{nvml_facts.get('driver.error')}; {smi_reason}")
        merged.set("nvml.error", nvml_error)
        return merged


def leave_out(facts: Facts, pids: set[int]) -> None:
    """Take cuda-doctor's own processes (the JAX child, say) out of ``gpu[i].processes``."""
    for i in facts.indices("gpu"):
        procs = facts.get(indexed("gpu", i, "processes"))
        if not isinstance(procs, list):
            continue
        others = [proc for proc in procs if not (isinstance(proc, dict) and proc.get("pid") in pids)]
        if len(others) < len(procs):
            facts.set(indexed("gpu", i, "processes"), others)
            facts.set(indexed("gpu", i, "process_count"), len(others))


def _less_specific(smi_status: str, nvml_status: Any) -> bool:
    """Whether nvidia-smi's failure says less than NVML's, which is then kept."""
    if smi_status == "error":
        return nvml_status != "error"
    # nvidia-smi loads the same libnvidia-ml.so.1: NVML named the broken file it found
    return smi_status == "library_not_found" and nvml_status == "library_unloadable"


def _collect_nvidia_smi(ctx: ProbeContext) -> Facts:
    # the fallback: its parser (and subprocess) is imported only when NVML cannot answer
    from cuda_doctor.gpu.nvidia_smi import collect_nvidia_smi

    return collect_nvidia_smi(ctx)


PROBE = GpuProbe()

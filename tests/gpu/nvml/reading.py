"""Reading a fake NVML through the real reader, as the GPU probe does."""

from __future__ import annotations

from typing import Any

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml.read import NvmlRead


def read_and_close(ctx: ProbeContext, module: Any) -> Facts:
    """What collect_nvml reads, waited on until NVML is shut down (which follows the hand-over)."""
    read = NvmlRead(ctx, module).start()
    facts = read.facts(ctx.timeout)
    assert read.closed.wait(10)
    return facts

"""The framework-level smoke child counts only processes that are not cuda-doctor's own."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from cuda_doctor.smoke.framework_level import Nvml


class _Processes:
    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list[Any]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=512 << 20) for pid in self.pids]


def _others(pids: list[int], ours: list[int]) -> dict[str, Any]:
    nvml = Nvml.__new__(Nvml)  # no pynvml here: only the counting is under test
    nvml.module, nvml.error = _Processes(pids), None
    nvml.ours = {os.getpid(), *ours}
    out: dict[str, Any] = {}
    nvml.others(object(), out)
    return out


def test_own_children_are_not_other_processes() -> None:
    driver_child = 4242
    out = _others([os.getpid(), driver_child, 777], [driver_child])
    assert out == {"other_process_count": 1, "other_process_mib": 512}


def test_a_stranger_is_counted() -> None:
    out = _others([os.getpid(), 4242], [])
    assert out["other_process_count"] == 1

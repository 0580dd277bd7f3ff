"""A stand-in for the ``pynvml`` module: the GPU is the one thing these tests cannot have."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    def __init__(self, value: int, text: str = "") -> None:
        super().__init__(text or f"NVML error {value}")
        self.value = value


class FakeNvml:
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    def __init__(
        self,
        count: int = 1,
        *,
        util: int = 50,
        pids: Callable[[int], list[int]] | None = None,
        init_error: NVMLError | None = None,
        pcie_error: NVMLError | None = None,
        hang_on_call: int | None = None,
    ) -> None:
        self.count = count
        self.util = util
        self.pids = pids or (lambda gpu: [])
        self.init_error = init_error
        self.pcie_error = pcie_error
        self.hang_on_call = hang_on_call  # the n-th utilisation read never returns
        self.release = threading.Event()
        self.calls: dict[str, int] = {}
        self.shutdown = False
        self._lock = threading.Lock()

    def _count(self, name: str) -> int:
        with self._lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            return self.calls[name]

    def total_calls(self) -> int:
        with self._lock:
            return sum(self.calls.values())

    def nvmlInit(self) -> None:
        self._count("init")
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self._count("shutdown")
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h:08d}-aaaa-bbbb-cccc-000000000000"

    def nvmlDeviceGetName(self, h: int) -> str:
        return "Fake H200"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(total=143771 << 20, used=2048 << 20, free=141723 << 20)

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return 700_000

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        n = self._count("utilization")
        if self.hang_on_call is not None and n >= self.hang_on_call:
            self.release.wait()
        return SimpleNamespace(gpu=self.util, memory=self.util // 2)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 350_000

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return 0x4

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        self._count("pcie")
        if self.pcie_error is not None:
            raise self.pcie_error
        return 500_000 if counter == self.NVML_PCIE_UTIL_RX_BYTES else 10_000

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 45

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=p, usedGpuMemory=1024 << 20) for p in self.pids(h)]

    def nvmlDeviceGetProcessUtilization(self, h: int, since: int) -> list[Any]:
        rows = [SimpleNamespace(pid=p, timeStamp=since + 1, smUtil=40, memUtil=10) for p in self.pids(h)]
        if not rows:
            raise NVMLError(6, "Not Found")
        return rows

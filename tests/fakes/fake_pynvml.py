"""A stand-in for the ``pynvml`` module: the one thing the tests cannot have is a GPU.

Its answers default to the readings recorded on a real H200 (``tests/fixtures/h200/nvml.txt``);
errors are real ``pynvml.NVMLError`` instances so the code under test sees what the binding
raises.  ``module()`` gives the object passed as ``nvml=``; functions listed in ``missing``
are absent from it, as in older nvidia-ml-py releases.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

MEMORY_V2 = pynvml.nvmlMemory_v2


def h200_readings(path: Path) -> dict[str, Any]:
    """The values printed in nvml.txt by a pynvml script on the H200 machine."""
    text = path.read_text(encoding="utf-8")

    def grab(pattern: str) -> tuple[str, ...]:
        match = re.search(pattern, text)
        assert match is not None, f"nvml.txt lacks {pattern!r}"
        return match.groups()

    driver, cuda, nvml_version = grab(r"driver (\S+) cuda_driver (\d+) nvml (\S+)")
    name, uuid, major, minor = grab(r"\n0 (.+?) (GPU-[0-9a-f-]+) cc \((\d+), (\d+)\)")
    total, free, used = grab(r"total: (\d+) B, free: (\d+) B, used: (\d+) B")
    gen, gen_max, width, width_max = grab(r"pcie gen (\d+) / (\d+) width (\d+) / (\d+)")
    persistence, mig_cur, mig_pend, ecc_cur, ecc_pend = grab(
        r"persistence (\d+) mig \[(\d+), (\d+)\] ecc \[(\d+), (\d+)\]"
    )
    (uncorrected,) = grab(r"ecc uncorrected volatile (\d+)")
    rows = tuple(int(v) for v in grab(r"remapped rows \((\d+), (\d+), (\d+), (\d+)\)"))
    (throttle,) = grab(r"throttle (\d+)")
    temp, power, limit = grab(r"temp (\d+) power mW (\d+) limit (\d+)")
    return {
        "driver": driver,
        "cuda_driver": int(cuda),
        "nvml": nvml_version,
        "name": name,
        "uuid": uuid,
        "cc": (int(major), int(minor)),
        "memory": SimpleNamespace(total=int(total), free=int(free), used=int(used)),
        "pcie": (int(gen), int(gen_max), int(width), int(width_max)),
        "persistence": int(persistence),
        "mig": [int(mig_cur), int(mig_pend)],
        "ecc": [int(ecc_cur), int(ecc_pend)],
        "uncorrected": int(uncorrected),
        "remapped_rows": rows,
        "clock_reasons": int(throttle),
        "temperature": int(temp),
        "power_mw": int(power),
        "limit_mw": int(limit),
        "processes": [],
        "pci_bus_id": "00000000:00:06.0",  # nvidia-smi-q.xml of the same machine
    }


@dataclass
class FakeNvml:
    readings: dict[str, Any]
    device_count: int = 1
    init_error: int | None = None
    init_exception: BaseException | None = None
    hang: threading.Event | None = None  # set → the call in ``hang_in`` waits on it
    hang_in: str = "nvmlInit"
    errors: dict[str, int] = field(default_factory=dict)  # function → NVML return code
    raises: dict[str, BaseException] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    as_bytes: bool = False  # older bindings return bytes for strings
    handle_errors: dict[int, int] = field(default_factory=dict)
    memory_v2_error: int | None = None  # e.g. FUNCTION_NOT_FOUND from a driver without v2
    calls: list[str] = field(default_factory=list)
    shutdowns: int = 0

    # -- the pynvml surface --------------------------------------------------------------
    def _str(self, value: str) -> str | bytes:
        return value.encode() if self.as_bytes else value

    def nvmlInit(self) -> None:
        if self.init_exception is not None:
            raise self.init_exception
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self._str(self.readings["driver"])

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return int(self.readings["cuda_driver"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self.readings["cuda_driver"])

    def nvmlSystemGetNVMLVersion(self) -> str | bytes:
        return self._str(self.readings["nvml"])

    def nvmlDeviceGetCount(self) -> int:
        return self.device_count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index in self.handle_errors:
            raise pynvml.NVMLError(self.handle_errors[index])
        return 1000 + index

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:
        return self._str(self.readings["name"])

    def nvmlDeviceGetUUID(self, handle: int) -> str | bytes:
        return self._str(self.readings["uuid"])

    def nvmlDeviceGetBrand(self, handle: int) -> int:
        return 14  # NVML_BRAND_NVIDIA: nvidia-smi prints product_brand "NVIDIA" on the H200

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._str(self.readings["pci_bus_id"]))

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return tuple(self.readings["cc"])

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> SimpleNamespace:
        v1 = self.readings["memory"]
        if version is None:
            return v1
        assert version == MEMORY_V2
        if self.memory_v2_error is not None:
            raise pynvml.NVMLError(self.memory_v2_error)
        # what the H200 answered to v2: v1's "used" is the driver's reservation
        return SimpleNamespace(total=v1.total, reserved=v1.used, free=v1.free, used=0)

    def nvmlDeviceGetEccMode(self, handle: int) -> list[int]:
        return list(self.readings["ecc"])

    def nvmlDeviceGetTotalEccErrors(self, handle: int, kind: int, counter: int) -> int:
        assert (kind, counter) == (
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        return int(self.readings["uncorrected"])

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        # the H200 retires no pages (nvidia-smi prints N/A): it remaps rows instead
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        return tuple(self.readings["remapped_rows"])

    def nvmlDeviceGetPersistenceMode(self, handle: int) -> int:
        return int(self.readings["persistence"])

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        return list(self.readings["mig"])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return int(self.readings["pcie"][0])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return int(self.readings["pcie"][1])

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return int(self.readings["pcie"][2])

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return int(self.readings["pcie"][3])

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return int(self.readings["clock_reasons"])

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: int) -> int:
        return int(self.readings["clock_reasons"])

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return int(self.readings["temperature"])

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self.readings["power_mw"])

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return int(self.readings["limit_mw"])

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return list(self.readings["processes"])

    # -- building the module object ------------------------------------------------------
    def module(self) -> SimpleNamespace:
        namespace = SimpleNamespace(NVMLError=pynvml.NVMLError)
        if "nvmlMemory_v2" not in self.missing:
            namespace.nvmlMemory_v2 = MEMORY_V2
        for attr in dir(self):
            if attr.startswith("nvml") and attr not in self.missing:
                setattr(namespace, attr, self._wrap(attr, getattr(self, attr)))
        return namespace

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if self.hang is not None and name == self.hang_in:
                self.hang.wait(60)
            if name in self.raises:
                raise self.raises[name]
            if name in self.errors:
                raise pynvml.NVMLError(self.errors[name])
            return function(*args, **kwargs)

        return call

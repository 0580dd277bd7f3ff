"""The one stand-in for the ``pynvml`` module: the one thing the tests cannot have is a GPU.

Its answers default to the readings recorded on a real H200 (``tests/fixtures/h200/nvml.txt``,
NVLink from the H200 pair in ``tests/nccl/fixtures/h200x2/nvml-nvlink.txt``); errors are real
``pynvml.NVMLError`` instances and its constants the real binding's, so the code under test sees
what the binding gives.  Each test sets what it needs: the GPUs (``device_count``, ``uuids``,
``processes``, ``mig_devices``, ``nvlinks``, ``nvlinks_down``, ``nvlink_errors``, ``fabric``,
``per_gpu`` readings), a function failing with an NVML code (``errors``) or an exception
(``raises``), absent as in older nvidia-ml-py releases (``missing``), field values an older
driver does not know (``unsupported_fields``), hanging (``hang``, ``hang_in``, ``hang_from``) or
slow (``slow``).  ``module()`` gives the object passed as ``nvml=``; ``tests/fakes/pynvml_h200``
installs it as ``pynvml`` for a whole process.

Field values are answered as a driver answers them: each from the same reading as the function
it stands for (``FIELD_SOURCES``), failing per field with that function's error.  That the
driver's fields and functions agree is NVML's documented meaning of each field, except one
modelling choice: NVML_FI_DEV_NVLINK_ERROR_DL_CRC (163) is taken as the flow-control plus data
CRC counters.  benchmarks/nvml_per_gpu.py compares both ways on a real GPU.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

MEMORY_V2 = pynvml.nvmlMemory_v2
_HANDLE_BASE = 1000  # GPU i's handle is 1000 + i; a MIG instance's is ("mig", GPU, slot)
_MAX_MIG_DEVICES = 7  # what NVML answers for a GPU in MIG mode (an H100/H200 has seven slices)
#: NVML field id → the function whose reading it gives (nvml.h's description of each field).
FIELD_SOURCES: dict[int, str] = {
    pynvml.NVML_FI_DEV_ECC_CURRENT: "nvmlDeviceGetEccMode",
    pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: "nvmlDeviceGetTotalEccErrors",
    pynvml.NVML_FI_DEV_RETIRED_PENDING: "nvmlDeviceGetRetiredPagesPendingStatus",
    pynvml.NVML_FI_DEV_REMAPPED_PENDING: "nvmlDeviceGetRemappedRows",
    pynvml.NVML_FI_DEV_REMAPPED_FAILURE: "nvmlDeviceGetRemappedRows",
    pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT: "nvmlDeviceGetNvLinkState",
    pynvml.NVML_FI_DEV_NVLINK_GET_STATE: "nvmlDeviceGetNvLinkState",
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY: "nvmlDeviceGetNvLinkErrorCounter",
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY: "nvmlDeviceGetNvLinkErrorCounter",
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC: "nvmlDeviceGetNvLinkErrorCounter",
}
_COUNTER_KEYS = {
    pynvml.NVML_NVLINK_ERROR_DL_REPLAY: "replay",
    pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: "recovery",
    pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: "crc_flit",
    pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA: "crc_data",
}


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
    sm_clock, sm_clock_max = grab(r"clocks sm (\d+) max (\d+)")
    util_gpu, util_memory = grab(r"util c_nvmlUtilization_t\(gpu: (\d+) %, memory: (\d+) %\)")
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
        "sm_clock": int(sm_clock),
        "sm_clock_max": int(sm_clock_max),
        "utilization": (int(util_gpu), int(util_memory)),
        "processes": [],
        "pci_bus_id": "00000000:00:06.0",  # nvidia-smi-q.xml of the same machine
        "nvlink_version": 6,  # the H200 pair's links (nvml-nvlink.txt)
        # not in the recording: an idle GPU's
        "pcie_kbps": (0, 0),  # (rx, tx)
        "process_sm_util": 0,
        # the same machine's nvidia-smi -q prints "GPU Recovery Action : None": field 230 is 0
        "fields": {230: (pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 0)},
    }


@dataclass
class FakeNvml:
    readings: dict[str, Any]
    device_count: int = 1
    uuids: dict[int, str] = field(default_factory=dict)  # GPU 0: the H200's; others made from it
    init_error: int | None = None
    init_exception: BaseException | None = None
    errors: dict[str, int] = field(default_factory=dict)  # function → NVML return code, every call
    raises: dict[str, BaseException] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    handle_errors: dict[int, int] = field(default_factory=dict)  # GPU index → code opening it
    memory_v2_error: int | None = None  # e.g. FUNCTION_NOT_FOUND from a driver without v2
    hang: threading.Event | None = None  # set → calls of ``hang_in`` wait on it (60 s at most)
    hang_in: str = "nvmlInit"
    hang_from: int = 1  # the first call of ``hang_in`` that waits (2: the first one answers)
    slow: dict[str, float] = field(default_factory=dict)  # function → seconds each call takes
    as_bytes: bool = False  # older bindings return bytes for strings
    processes: dict[int, list[SimpleNamespace]] = field(default_factory=dict)  # GPU → its own
    mig_devices: dict[int, list[str]] = field(default_factory=dict)  # GPU → its MIG instances' UUIDs
    nvlinks: int = 18  # links per GPU (the H200 pair's); 0: a PCIe-only board
    nvlinks_down: frozenset[tuple[int, int]] = frozenset()  # (GPU, link)
    field_values: dict[int, tuple[int, float]] = field(default_factory=dict)  # NVML_FI_* → (type, value)
    unsupported_fields: frozenset[int] = frozenset()  # an older driver answers NOT_SUPPORTED for these
    nvlink_errors: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)  # (GPU, link) → counts
    nvlink_counters_supported: bool = True  # False: a Blackwell GPU (NVML dropped these counters there)
    fabric: dict[int, tuple[int, int]] = field(default_factory=dict)  # GPU → (state, status); default N/A
    per_gpu: dict[int, dict[str, Any]] = field(default_factory=dict)  # GPU → readings that differ from GPU 0's
    xid_events: list[tuple[int, int]] = field(default_factory=list)  # (GPU, Xid) delivered one per wait
    xid_unsupported: frozenset[int] = frozenset()  # GPUs that refuse to register for Xid events
    log: str | None = None  # a file each call's name is appended to (a fake in another process)
    calls: list[str] = field(default_factory=list)
    shutdowns: int = 0

    # -- the pynvml surface --------------------------------------------------------------
    def _str(self, value: str) -> str | bytes:
        return value.encode() if self.as_bytes else value

    def _gpu(self, handle: Any) -> int:
        return int(handle[1]) if isinstance(handle, tuple) else int(handle) - _HANDLE_BASE

    def _reading(self, handle: Any, key: str) -> Any:
        return self.per_gpu.get(self._gpu(handle), {}).get(key, self.readings[key])

    def uuid(self, index: int) -> str:
        if index in self.uuids:
            return self.uuids[index]
        recorded = str(self.readings["uuid"])
        return recorded if index == 0 else f"GPU-{index:08x}{recorded[12:]}"

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
        return _HANDLE_BASE + index

    def nvmlDeviceGetName(self, handle: Any) -> str | bytes:
        return self._str(self._reading(handle, "name"))

    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes:
        if isinstance(handle, tuple):
            return self._str(self.mig_devices[handle[1]][handle[2]])
        return self._str(self.uuid(self._gpu(handle)))

    def nvmlDeviceGetBrand(self, handle: Any) -> int:
        return 14  # NVML_BRAND_NVIDIA: nvidia-smi prints product_brand "NVIDIA" on the H200

    def nvmlDeviceGetPciInfo(self, handle: Any) -> SimpleNamespace:
        gpu = self._gpu(handle)  # GPU i sits at device 06 + i on bus 0, as in a VM's passthrough
        recorded = str(self._reading(handle, "pci_bus_id"))
        return SimpleNamespace(busId=self._str(recorded if gpu == 0 else f"{recorded[:-4]}{6 + gpu:02X}.0"))

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        return tuple(self.readings["cc"])

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> SimpleNamespace:
        v1 = self.readings["memory"]
        if version is None:
            return v1
        assert version == MEMORY_V2
        if self.memory_v2_error is not None:
            raise pynvml.NVMLError(self.memory_v2_error)
        # what the H200 answered to v2: v1's "used" is the driver's reservation
        return SimpleNamespace(total=v1.total, reserved=v1.used, free=v1.free, used=0)

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        return list(self._reading(handle, "ecc"))

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, kind: int, counter: int) -> int:
        assert (kind, counter) == (
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        return int(self._reading(handle, "uncorrected"))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int:
        # the H200 retires no pages (nvidia-smi prints N/A): it remaps rows instead
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        return tuple(self._reading(handle, "remapped_rows"))

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return int(self.readings["persistence"])

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        return [1, 1] if self._gpu(handle) in self.mig_devices else list(self.readings["mig"])

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        return _MAX_MIG_DEVICES if self._gpu(handle) in self.mig_devices else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, slot: int) -> tuple[str, int, int]:
        gpu = self._gpu(handle)
        if slot >= len(self.mig_devices.get(gpu, ())):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return ("mig", gpu, slot)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return int(self.readings["pcie"][0])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return int(self.readings["pcie"][1])

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return int(self.readings["pcie"][2])

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return int(self.readings["pcie"][3])

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return int(self._reading(handle, "clock_reasons"))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        return int(self.readings["clock_reasons"])

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return int(self.readings["temperature"])

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return int(self.readings["power_mw"])

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return int(self.readings["limit_mw"])

    def nvmlDeviceGetClockInfo(self, handle: Any, kind: int) -> int:
        assert kind == pynvml.NVML_CLOCK_SM
        return int(self.readings["sm_clock"])

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, kind: int) -> int:
        assert kind == pynvml.NVML_CLOCK_SM
        return int(self.readings["sm_clock_max"])

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> SimpleNamespace:
        gpu, memory = self.readings["utilization"]
        return SimpleNamespace(gpu=gpu, memory=memory)

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: int) -> int:
        rx, tx = self.readings["pcie_kbps"]
        return int(rx if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES else tx)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[SimpleNamespace]:
        return list(self.processes.get(self._gpu(handle), self.readings["processes"]))

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> list[SimpleNamespace]:
        rows = [
            SimpleNamespace(pid=p.pid, timeStamp=since + 1, smUtil=self.readings["process_sm_util"], memUtil=10)
            for p in self.nvmlDeviceGetComputeRunningProcesses(handle)
        ]
        if not rows:  # what NVML answers when no process ran a kernel since ``since``
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return rows

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        if self.nvlinks == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= self.nvlinks:  # what the H200 answered for link 18
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return 0 if (self._gpu(handle), link) in self.nvlinks_down else pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkVersion(self, handle: Any, link: int) -> int:
        return int(self.readings["nvlink_version"])

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:
        self.nvmlDeviceGetNvLinkState(handle, link)  # the same answer for a link that does not exist
        if not self.nvlink_counters_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(self.nvlink_errors.get((self._gpu(handle), link), {}).get(_COUNTER_KEYS[counter], 0))

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, info: Any) -> int:
        state, status = self.fabric.get(self._gpu(handle), (pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0))
        struct = info._obj  # what ctypes.byref() wraps
        assert struct.version == pynvml.nvmlGpuFabricInfo_v2
        struct.state, struct.status = state, status
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, info: Any) -> int:
        state, status = self.fabric.get(self._gpu(handle), (pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0))
        info._obj.state, info._obj.status = state, status
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetFieldValues(self, handle: Any, fields: list[int | tuple[int, int]]) -> Any:
        """The real binding's array of c_nvmlFieldValue_t, filled as the driver fills it."""
        values = (pynvml.c_nvmlFieldValue_t * len(fields))()
        members = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
        answers = {**self.readings.get("fields", {}), **self.field_values}
        for entry, asked in zip(values, fields, strict=True):
            field_id, entry.scopeId = asked if isinstance(asked, tuple) else (asked, 0)
            entry.fieldId = field_id
            known = field_id not in self.unsupported_fields  # an older driver knows none of ``answers`` either
            answer = (answers.get(field_id) if known else None) or self._field(handle, field_id, entry.scopeId)
            if isinstance(answer, int):  # an NVML return code for this one field
                entry.nvmlReturn = answer
                continue
            kind, value = answer
            entry.valueType = kind
            setattr(entry.value, members[kind], value)
        return values

    def _field(self, handle: Any, field_id: int, scope: int) -> tuple[int, int] | int:
        """One field as the driver answers it: from its function's reading, or that function's error."""
        function = FIELD_SOURCES.get(field_id)
        if function is None or field_id in self.unsupported_fields:
            return int(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if function in self.errors:
            return self.errors[function]
        if function in self.raises:
            return int(pynvml.NVML_ERROR_UNKNOWN)
        try:
            return self._field_value(handle, field_id, scope)
        except pynvml.NVMLError as exc:
            return int(exc.value)

    def _field_value(self, handle: Any, field_id: int, link: int) -> tuple[int, int]:
        uint, ull = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        if field_id == pynvml.NVML_FI_DEV_ECC_CURRENT:
            return uint, self.nvmlDeviceGetEccMode(handle)[0]
        if field_id == pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
            return ull, self.nvmlDeviceGetTotalEccErrors(
                handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
            )
        if field_id == pynvml.NVML_FI_DEV_RETIRED_PENDING:
            return uint, self.nvmlDeviceGetRetiredPagesPendingStatus(handle)
        if field_id in (pynvml.NVML_FI_DEV_REMAPPED_PENDING, pynvml.NVML_FI_DEV_REMAPPED_FAILURE):
            rows = self.nvmlDeviceGetRemappedRows(handle)
            return uint, rows[2] if field_id == pynvml.NVML_FI_DEV_REMAPPED_PENDING else rows[3]
        if field_id == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
            return uint, self.nvlinks
        if field_id == pynvml.NVML_FI_DEV_NVLINK_GET_STATE:
            enabled = self.nvmlDeviceGetNvLinkState(handle, link) == pynvml.NVML_FEATURE_ENABLED
            return uint, pynvml.NVML_NVLINK_STATE_ACTIVE if enabled else pynvml.NVML_NVLINK_STATE_INACTIVE
        counters = {
            pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY: (pynvml.NVML_NVLINK_ERROR_DL_REPLAY,),
            pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY: (pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,),
            pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC: (
                pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
                pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
            ),
        }[field_id]
        return ull, sum(self.nvmlDeviceGetNvLinkErrorCounter(handle, link, c) for c in counters)

    # -- building the module object ------------------------------------------------------
    def nvmlEventSetCreate(self) -> object:
        return object()

    def nvmlDeviceRegisterEvents(self, handle: Any, types: int, event_set: object) -> None:
        if self._gpu(handle) in self.xid_unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> SimpleNamespace:
        if not self.xid_events:
            time.sleep(min(timeout_ms, 20) / 1000)
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        gpu, xid = self.xid_events.pop(0)
        return SimpleNamespace(device=_HANDLE_BASE + gpu, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)

    def nvmlEventSetFree(self, event_set: object) -> None:
        pass

    def module(self) -> SimpleNamespace:
        namespace = SimpleNamespace(**{k: v for k, v in vars(pynvml).items() if k.startswith("NVML_")})
        namespace.NVMLError = pynvml.NVMLError
        namespace.nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError
        for struct in ("c_nvmlGpuFabricInfo_t", "c_nvmlGpuFabricInfoV_t"):
            if struct not in self.missing:
                setattr(namespace, struct, getattr(pynvml, struct))
        if "nvmlMemory_v2" not in self.missing:
            namespace.nvmlMemory_v2 = MEMORY_V2
        for attr in dir(self):
            if attr.startswith("nvml") and attr not in self.missing:
                setattr(namespace, attr, self._wrap(attr, getattr(self, attr)))
        return namespace

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if self.log:
                with open(self.log, "a", encoding="utf-8") as handle:
                    handle.write(name + "\n")
            time.sleep(self.slow.get(name, 0.0))
            if self.hang is not None and name == self.hang_in and self.calls.count(name) >= self.hang_from:
                self.hang.wait(60)
            if name in self.raises:
                raise self.raises[name]
            if name in self.errors:
                raise pynvml.NVMLError(self.errors[name])
            return function(*args, **kwargs)

        return call

"""NVML opened through the C library itself, before ``pynvml`` is imported, for ``entry``'s
reading commands.

NVML answers some questions much more slowly the first time a process asks.  Measured on an
H200 machine: initialisation about 13 ms, opening a GPU 7 ms, its ECC error count 3 ms, ECC
mode 2, power 2, clock-event reasons 1.5; later asks take microseconds.  Importing the binding
takes 10-70 ms of Python there, so these first asks are made meanwhile, on a daemon thread started
before anything else is imported, and the probe's own reads through pynvml find them answered.
They are the probe's own questions: the batch of field values (``fields.GPU_BATCH``, which holds
the ECC readings), the links' batch on a GPU with NVLinks, power, clock-event reasons and the
fabric state.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from cuda_doctor.nvml import fields

#: Why the early asks stopped (no driver library, or an older one), and why the binding did not
#: import ahead: only for debugging, as pynvml's own attempt is the one that counts.
early_errors: list[str] = []


def open_driver_early(load: Callable[[str], Any] | None = None) -> threading.Thread:
    """Make the slow first asks on a daemon thread, now.

    pynvml's ``nvmlInit`` only counts one more user of the open library (NVML keeps a reference
    count); this early reference is never released, as the probing commands end the process
    right after.  The answers are thrown away: whatever fails here fails again through pynvml,
    which records the reason.  ``load`` opens the library (tests pass a fake).
    """

    def ask_early() -> None:
        import ctypes

        try:
            library = (load or ctypes.CDLL)("libnvidia-ml.so.1")
            _first_asks(library, ctypes)
        except (OSError, AttributeError) as exc:  # no driver library, or an older one without a function
            early_errors.append(str(exc))

    thread = threading.Thread(target=ask_early, name="cuda-doctor-nvml-early", daemon=True)
    thread.start()
    return thread


def _first_asks(library: Any, ctypes: Any) -> None:
    """The slow first asks, with nvml.h's signatures; every answer is discarded.  One GPU after
    the other: the driver serialises these, and more threads only add contention (measured on
    two H200s)."""
    if library.nvmlInit_v2() != 0:
        return
    count = ctypes.c_uint(0)
    if library.nvmlDeviceGetCount_v2(ctypes.pointer(count)) != 0:
        return
    for index in range(count.value):
        if not _ask_gpu(library, ctypes, index):
            return


def _ask_gpu(library: Any, ctypes: Any, index: int) -> bool:
    """False when this library lacks one of the functions every supported driver has: stop
    asking.  The fabric state is newer (driver 525): a library without it is asked the rest."""
    handle = ctypes.c_void_p()
    if library.nvmlDeviceGetHandleByIndex_v2(index, ctypes.pointer(handle)) != 0:
        return True
    wide, narrow = ctypes.c_ulonglong(), ctypes.c_uint()
    try:
        links = _ask_fields(library, ctypes, handle, list(fields.GPU_BATCH)).get(fields.NVLINK_LINK_COUNT, 0)
        if links:
            _ask_fields(library, ctypes, handle, fields.link_batch(links))
        library.nvmlDeviceGetPowerUsage(handle, ctypes.pointer(narrow))
        library.nvmlDeviceGetCurrentClocksEventReasons(handle, ctypes.pointer(wide))
    except AttributeError as exc:
        early_errors.append(str(exc))
        return False
    try:
        fabric = _fabric_info(ctypes)()
        fabric.version = _FABRIC_INFO_V2
        library.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.pointer(fabric))
    except AttributeError as exc:
        early_errors.append(str(exc))
    return True


#: nvmlGpuFabricInfo_v2: the struct's size (36) and version 2, as nvml.h builds it.
_FABRIC_INFO_V2 = 0x02000024


def _ask_fields(library: Any, ctypes: Any, handle: Any, asked: list[Any]) -> dict[int, int]:
    """One nvmlDeviceGetFieldValues round trip; the unsigned answers of those it answered."""
    entries = (_field_value(ctypes) * len(asked))()
    for entry, field in zip(entries, asked, strict=True):
        entry.fieldId, entry.scopeId = field if isinstance(field, tuple) else (field, 0)
    if library.nvmlDeviceGetFieldValues(handle, len(asked), entries) != 0:
        return {}
    return {int(e.fieldId): int(e.value.uiVal) for e in entries if e.nvmlReturn == 0 and e.scopeId == 0}


@functools.cache
def _field_value(ctypes: Any) -> Any:
    """nvmlFieldValue_t (nvml.h), made when first needed: ctypes is imported on the thread."""
    value_fields = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong)]
    value_fields += [("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong), ("siVal", ctypes.c_int)]
    value = type("nvmlValue_t", (ctypes.Union,), {"_fields_": [*value_fields, ("usVal", ctypes.c_ushort)]})
    return type(
        "nvmlFieldValue_t",
        (ctypes.Structure,),
        {
            "_fields_": [
                ("fieldId", ctypes.c_uint32),
                ("scopeId", ctypes.c_uint32),
                ("timestamp", ctypes.c_int64),
                ("latencyUsec", ctypes.c_int64),
                ("valueType", ctypes.c_int),
                ("nvmlReturn", ctypes.c_int),
                ("value", value),
            ]
        },
    )


@functools.cache
def _fabric_info(ctypes: Any) -> Any:
    """nvmlGpuFabricInfoV_t, version 2 (nvml.h)."""
    return type(
        "nvmlGpuFabricInfoV_t",
        (ctypes.Structure,),
        {
            "_fields_": [
                ("version", ctypes.c_uint),
                ("clusterUuid", ctypes.c_uint8 * 16),
                ("status", ctypes.c_int),
                ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint32),
                ("healthMask", ctypes.c_uint32),
            ]
        },
    )

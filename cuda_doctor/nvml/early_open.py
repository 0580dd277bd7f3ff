"""NVML opened through the C library itself, before ``pynvml`` is imported, for ``entry``'s
reading commands.

NVML answers some questions much more slowly the first time a process asks.  Measured on an
H200 machine: initialisation about 13 ms, opening a GPU 7 ms, its ECC error count 3 ms, ECC
mode 2, power 2, clock-event reasons 1.5; later asks take microseconds.  Importing the binding
takes 10-70 ms of Python there, so these first asks are made meanwhile, on a daemon thread, and
the probe's own reads through pynvml find them answered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cuda_doctor.nvml.binding import MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC

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
    """False when this library lacks one of the functions (an older driver): stop asking."""
    handle = ctypes.c_void_p()
    if library.nvmlDeviceGetHandleByIndex_v2(index, ctypes.pointer(handle)) != 0:
        return True
    wide, current, pending, narrow = ctypes.c_ulonglong(), ctypes.c_int(), ctypes.c_int(), ctypes.c_uint()
    try:
        library.nvmlDeviceGetTotalEccErrors(handle, MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC, ctypes.pointer(wide))
        library.nvmlDeviceGetEccMode(handle, ctypes.pointer(current), ctypes.pointer(pending))
        library.nvmlDeviceGetPowerUsage(handle, ctypes.pointer(narrow))
        library.nvmlDeviceGetCurrentClocksEventReasons(handle, ctypes.pointer(wide))
    except AttributeError as exc:
        early_errors.append(str(exc))
        return False
    return True

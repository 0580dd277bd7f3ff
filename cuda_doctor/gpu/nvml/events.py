"""Critical Xid events that NVML delivers while cuda-doctor listens (without root, but only those
that happen while registered), so that a GPU that faults under load is named with its Xid.  The
conversation runs on its own daemon thread, waiting in short steps, abandoned if the driver hangs."""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

from cuda_doctor.gpu.nvml import binding

#: How long one wait for an event lasts, in milliseconds: the longest a stop waits for the thread.
WAIT_MS = 200
#: The most events kept: a GPU in trouble can raise thousands.
KEPT = 100


class XidEvents:
    """Listens from ``start`` to ``stop``; ``stop`` returns the events and why listening failed."""

    def __init__(self, nvml: Any = None) -> None:
        self._nvml = nvml
        self._stop = threading.Event()
        self._ready = threading.Event()  # registered (or failed): events from then on are caught
        self._events: list[dict[str, Any]] = []
        self._error: str | None = None
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="cuda-doctor-xid-events", daemon=True)

    def start(self, ready_timeout: float = 5.0) -> XidEvents:
        self._thread.start()
        self._ready.wait(ready_timeout)
        return self

    def stop(self, timeout: float = 2.0) -> tuple[list[dict[str, Any]], str | None]:
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            return list(self._events), self._error or f"NVML's event wait did not end within {timeout:g} s"
        return list(self._events), self._error

    def _run(self) -> None:
        nvml = None
        event_set = None
        try:
            nvml = binding.load() if self._nvml is None else self._nvml
            binding.init(nvml)
            event_set = nvml.nvmlEventSetCreate()
            indices = self._register(nvml, event_set)
            self._ready.set()
            if not indices:
                self._error = "no GPU here delivers Xid events through NVML"
                return
            while not self._stop.is_set():
                self._wait(nvml, event_set, indices)
        except binding.NvmlUnavailable as exc:
            self._error = f"NVML is not available: {exc.detail}"
        except Exception as exc:  # a binding that fails in any way is a reason, never a crash
            self._error = f"NVML's Xid events could not be read: {type(exc).__name__}: {exc}"
        finally:
            self._ready.set()
            self._close(nvml, event_set)

    def _register(self, nvml: Any, event_set: Any) -> dict[Any, int]:
        """Register every GPU that supports Xid events; its handle → its index."""
        indices: dict[Any, int] = {}
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
            except nvml.NVMLError:  # NOT_SUPPORTED on this GPU: the others still listen
                continue
            indices[_key(handle)] = index
        return indices

    def _wait(self, nvml: Any, event_set: Any, indices: dict[Any, int]) -> None:
        try:
            data = nvml.nvmlEventSetWait_v2(event_set, WAIT_MS)
        except nvml.NVMLError as exc:
            if binding.error_code(exc) == nvml.NVML_ERROR_TIMEOUT:
                return
            raise
        if len(self._events) < KEPT:
            gpu = indices.get(_key(data.device))
            seconds = round(time.monotonic() - self._started, 1)
            self._events.append({"gpu": gpu, "xid": int(data.eventData), "after_s": seconds})

    def _close(self, nvml: Any, event_set: Any) -> None:
        if nvml is None:
            return
        if event_set is not None:
            try:
                nvml.nvmlEventSetFree(event_set)
            except Exception as exc:  # closing only: the events are already kept
                self._error = self._error or f"nvmlEventSetFree failed: {exc}"
        binding.shutdown(nvml)


def _key(handle: Any) -> Any:
    """A device handle as a dictionary key: two ctypes pointers to one device are equal by address."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):  # not a ctypes pointer (a test's stand-in)
        return handle

"""Sample NVML in a background thread while the command runs.

Every NVML call runs on one worker thread (a whole tick per hand-off) and the sampler waits for
it with a time limit: a
driver that stops answering ends sampling (with the reason), never the command. Both threads are
daemons and are joined with a timeout, so the sampler can neither keep the process alive nor
outlive the child by more than that limit.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from cuda_doctor.probes.nvml import NVML_ERROR_NOT_SUPPORTED
from cuda_doctor.watch.samples import GpuInfo, Sample, Series

DEFAULT_INTERVAL_S = 1.0
DEFAULT_CALL_TIMEOUT_S = 5.0
PID_REFRESH_TICKS = 5
_MIB = 1024 * 1024
_NOT_FOUND = 6  # NVML_ERROR_NOT_FOUND: no utilisation samples since the timestamp


class NvmlHung(Exception):
    """NVML did not return in time; sampling stops."""


@dataclass
class _Slot:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


class BoundedCaller:
    """Runs callables on one daemon worker thread and waits for each at most ``timeout`` seconds."""

    def __init__(self, name: str = "cuda-doctor-nvml") -> None:
        self._tasks: queue.Queue[tuple[Callable[[], Any], _Slot] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self.cpu_s = 0.0
        self.hung: str | None = None

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        if self.hung is not None:
            raise NvmlHung(self.hung)
        slot = _Slot()
        self._tasks.put((fn, slot))
        if not slot.done.wait(timeout):
            self.hung = f"NVML did not answer in {timeout:g} s; sampling stopped"
            raise NvmlHung(self.hung)
        if slot.error is not None:
            raise slot.error
        return slot.value

    def close(self, timeout: float = 1.0) -> None:
        self._tasks.put(None)
        if self.hung is None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            fn, slot = task
            start = time.thread_time()
            try:
                slot.value = fn()
            except BaseException as exc:  # handed back to the caller, who records it
                slot.error = exc
            self.cpu_s += time.thread_time() - start
            slot.done.set()


def nvml_error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_indices(value: str | None, uuids: list[str | None]) -> tuple[list[int], str | None]:
    """The NVML indices a process sees under CUDA_VISIBLE_DEVICES=value (indices or UUID prefixes).

    Like CUDA, the list ends at the first entry that names no device.
    """
    everything = list(range(len(uuids)))
    if value is None:
        return everything, None
    tokens = [t.strip() for t in value.split(",")]
    if not any(tokens):
        return [], "CUDA_VISIBLE_DEVICES is empty: the command sees no GPU"
    chosen: list[int] = []
    for token in tokens:
        if token.startswith("MIG-"):
            return everything, "CUDA_VISIBLE_DEVICES names MIG devices: sampling every GPU"
        index: int | None = None
        if token.lstrip("-").isdigit():
            n = int(token)
            index = n if 0 <= n < len(uuids) else None
        else:
            matches = [i for i, u in enumerate(uuids) if u and u.startswith(token)]
            index = matches[0] if len(matches) == 1 else None
        if index is None:
            break
        if index not in chosen:
            chosen.append(index)
    note = None
    if not chosen:
        note = f"CUDA_VISIBLE_DEVICES={value!r} names no GPU NVML knows"
    return chosen, note


def child_tree(pid: int, proc_root: str = "/proc") -> frozenset[int]:
    """``pid`` and its descendants, from /proc/<pid>/task/*/children (``pid`` if unreadable)."""
    found = {pid}
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tids = os.listdir(f"{proc_root}/{current}/task")
        except OSError:
            continue  # gone, or no /proc: the pid itself is all we know
        for tid in tids:
            try:
                with open(f"{proc_root}/{current}/task/{tid}/children") as handle:
                    kids = [int(x) for x in handle.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in found:
                    found.add(kid)
                    todo.append(kid)
    return frozenset(found)


class Sampler:
    """Samples the GPUs visible to process ``pid`` every ``interval`` seconds until ``stop``."""

    def __init__(
        self,
        pid: int,
        *,
        interval: float = DEFAULT_INTERVAL_S,
        nvml: Any = None,
        env: Mapping[str, str] | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT_S,
        started: float | None = None,
        proc_root: str = "/proc",
        command: tuple[str, ...] = (),
    ) -> None:
        self.pid = pid
        self.interval = interval
        self._nvml = nvml
        self._env = os.environ if env is None else env
        self._call_timeout = call_timeout
        self._t0 = time.monotonic() if started is None else started
        self._proc_root = proc_root
        self._command = command
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cuda-doctor-sampler", daemon=True)
        self._caller: BoundedCaller | None = None
        self._handles: list[tuple[int, Any]] = []
        self._gpus: list[GpuInfo] = []
        self._samples: list[Sample] = []
        self._notes: dict[str, str] = {}
        self._unsupported: set[tuple[int, str]] = set()
        self._last_util_ts: dict[int, int] = {}
        self._error: str | None = None
        self._per_process = False
        self._cpu_s = 0.0
        self._initialised = False
        self._pids: frozenset[int] | None = None
        self._ticks = 0

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def start(self) -> None:
        self._thread.start()

    def stop(self, join_timeout: float | None = None) -> Series:
        """Stop sampling and return what was recorded; waits at most ``join_timeout`` seconds."""
        ended = time.monotonic()
        self._stop.set()
        limit = self._call_timeout + 1.0 if join_timeout is None else join_timeout
        if self._thread.is_alive() or self._thread.ident is not None:
            self._thread.join(limit)
        notes = dict(self._notes)
        if self._thread.is_alive():
            notes["join"] = f"the sampler did not stop within {limit:g} s and was abandoned"
        worker_cpu = self._caller.cpu_s if self._caller is not None else 0.0
        return Series(
            interval_s=self.interval,
            duration_s=round(ended - self._t0, 3),
            gpus=tuple(self._gpus),
            samples=tuple(self._samples),
            nvml_error=self._error,
            notes=tuple(notes.values()),
            per_process=self._per_process,
            sampler_cpu_s=round(self._cpu_s + worker_cpu, 6),
            command=self._command,
        )

    # -- the sampling thread -------------------------------------------------------------------

    def _run(self) -> None:
        cpu_start = time.thread_time()
        self._caller = BoundedCaller()
        try:
            self._call(self._setup)  # the whole set-up under one time limit
            while self._error is None and not self._stop.is_set():
                tick_start = time.monotonic()
                self._tick()
                # Keep the cadence: sleep what is left of the interval, wake at once on stop.
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - tick_start)))
        except NvmlHung as exc:
            self._error = str(exc)
        except Exception as exc:  # a sampler bug must not cost the user their run
            self._error = f"sampling stopped: {type(exc).__name__}: {exc}"
        finally:
            self._shutdown()
            self._cpu_s += time.thread_time() - cpu_start

    def _call(self, fn: Callable[[], Any]) -> Any:
        assert self._caller is not None
        return self._caller.call(fn, self._call_timeout)

    def _setup(self) -> None:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as exc:
                self._error = f"NVML is not available: nvidia-ml-py (module pynvml) is not installed ({exc})"
                return
            self._nvml = pynvml
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:
            self._error = f"NVML is not available: {exc}"
            return
        self._initialised = True
        try:
            count = int(nvml.nvmlDeviceGetCount())
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self._error = f"NVML could not list the GPUs: {exc}"
            return
        uuids = [_text(self._field(i, "uuid", partial(nvml.nvmlDeviceGetUUID, h))) for i, h in enumerate(handles)]
        indices, note = visible_indices(self._env.get("CUDA_VISIBLE_DEVICES"), uuids)
        if note:
            self._notes["visible"] = note
        if count == 0:
            self._error = "NVML found no GPU"
            return
        for i in indices:
            h = handles[i]
            self._handles.append((i, h))
            self._gpus.append(self._static(i, h, uuids[i]))

    def _static(self, index: int, h: Any, uuid: str | None) -> GpuInfo:
        nvml = self._nvml
        mem = self._field(index, "memory_total", lambda: nvml.nvmlDeviceGetMemoryInfo(h).total / _MIB)
        clock = self._field(index, "clock_max", lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM))
        power = self._field(index, "power_limit", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000)
        return GpuInfo(
            index=index,
            uuid=uuid,
            name=self._field(index, "name", lambda: _text(nvml.nvmlDeviceGetName(h))),
            memory_total_mib=None if mem is None else round(float(mem), 1),
            sm_clock_max_mhz=None if clock is None else float(clock),
            power_limit_w=None if power is None else float(power),
        )

    def _field(self, gpu: int, key: str, read: Callable[[], Any]) -> Any:
        """One NVML reading on the worker thread; None (the reason noted once) when it fails."""
        if (gpu, key) in self._unsupported:
            return None
        try:
            return read()
        except Exception as exc:
            if nvml_error_code(exc) == NVML_ERROR_NOT_SUPPORTED:
                self._unsupported.add((gpu, key))  # asking again each tick would only cost time
            self._notes.setdefault(f"{key}:{exc}", f"GPU {gpu}: {key} unavailable ({exc})")
            return None

    def _tick(self) -> None:
        t = round(time.monotonic() - self._t0, 3)
        # The process tree changes rarely; walking /proc every tick would cost more than NVML.
        if self._pids is None or self._ticks % PID_REFRESH_TICKS == 0:
            self._pids = child_tree(self.pid, self._proc_root)
        self._ticks += 1
        pids = self._pids
        # One hand-off to the NVML thread per tick (not per call): that is most of the CPU cost.
        self._samples.extend(self._call(lambda: [self._read(t, i, h, pids) for i, h in self._handles]))

    def _read(self, t: float, index: int, h: Any, pids: frozenset[int]) -> Sample:
        nvml = self._nvml
        util = self._field(index, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(h))
        mem = self._field(index, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(h))
        power = self._field(index, "power", lambda: nvml.nvmlDeviceGetPowerUsage(h))
        clock = self._field(index, "sm_clock", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
        reasons = self._field(index, "clock_event_reasons", lambda: self._reasons(h))
        rx = self._field(
            index,
            "pcie_rx",
            lambda: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_RX_BYTES),
        )
        tx = self._field(
            index,
            "pcie_tx",
            lambda: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_TX_BYTES),
        )
        temp = self._field(
            index,
            "temperature",
            lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
        )
        on_gpu, child_mem, child_sm = self._child_use(index, h, pids)
        return Sample(
            t=t,
            gpu=index,
            sm_util=None if util is None else float(util.gpu),
            mem_util=None if util is None else float(util.memory),
            mem_used_mib=None if mem is None else round(mem.used / _MIB, 1),
            power_w=None if power is None else round(power / 1000, 1),
            sm_clock_mhz=None if clock is None else float(clock),
            clock_event_reasons=None if reasons is None else int(reasons),
            pcie_rx_mbps=None if rx is None else round(rx * 1024 / 1e6, 2),  # NVML gives KB/s
            pcie_tx_mbps=None if tx is None else round(tx * 1024 / 1e6, 2),
            temperature_c=None if temp is None else float(temp),
            child_on_gpu=on_gpu,
            child_sm_util=child_sm,
            child_mem_used_mib=child_mem,
        )

    def _reasons(self, h: Any) -> int:
        nvml = self._nvml
        read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if read is None:  # bindings older than the rename
            read = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(read(h))

    def _child_use(self, index: int, h: Any, pids: frozenset[int]) -> tuple[bool | None, float | None, float | None]:
        nvml = self._nvml
        procs = self._field(index, "processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h))
        if procs is None:
            return None, None, None
        mine = [p for p in procs if p.pid in pids]
        if not mine:
            return False, None, None
        self._per_process = True
        used = [p.usedGpuMemory for p in mine if isinstance(p.usedGpuMemory, int)]
        child_mem = round(sum(used) / _MIB, 1) if used else None
        return True, child_mem, self._child_sm(index, h, pids)

    def _child_sm(self, index: int, h: Any, pids: frozenset[int]) -> float | None:
        if (index, "process_utilization") in self._unsupported:
            return None
        nvml = self._nvml
        since = self._last_util_ts.get(index, 0)
        try:
            rows = nvml.nvmlDeviceGetProcessUtilization(h, since)
        except Exception as exc:
            code = nvml_error_code(exc)
            if code == _NOT_FOUND:
                return 0.0  # no kernel of any process since the last reading
            if code == NVML_ERROR_NOT_SUPPORTED:
                self._unsupported.add((index, "process_utilization"))
            self._notes.setdefault(f"putil:{exc}", f"GPU {index}: per-process utilisation unavailable ({exc})")
            return None
        latest: dict[int, Any] = {}
        for row in rows:
            if row.pid in pids and (row.pid not in latest or row.timeStamp > latest[row.pid].timeStamp):
                latest[row.pid] = row
        if rows:
            self._last_util_ts[index] = max(int(r.timeStamp) for r in rows)
        return float(min(100, sum(int(r.smUtil) for r in latest.values())))

    def _shutdown(self) -> None:
        caller = self._caller
        if caller is None:
            return
        if self._initialised and caller.hung is None:
            try:
                caller.call(self._nvml.nvmlShutdown, 1.0)
            except Exception as exc:
                self._notes.setdefault("shutdown", f"nvmlShutdown failed: {exc}")
        caller.close()

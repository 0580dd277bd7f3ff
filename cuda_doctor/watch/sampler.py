"""Sample NVML in a background thread while the command runs.  NVML calls run on one worker thread
under a time limit: a driver that stops answering ends sampling (with the reason), never the command."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from cuda_doctor.base.deadline import Overrun, Worker
from cuda_doctor.gpu.nvml import binding
from cuda_doctor.gpu.nvml.binding import Refusal
from cuda_doctor.gpu.visible_devices import visible_gpus
from cuda_doctor.watch.samples import GpuInfo, Sample, Series

DEFAULT_INTERVAL_S = 1.0
DEFAULT_CALL_TIMEOUT_S = 5.0
PID_REFRESH_TICKS = 5
_MIB = 1024 * 1024
#: The newer name first; bindings older than the rename have only the second.
_CLOCK_EVENT_REASONS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


def visible_indices(
    value: str | None, uuids: list[str | None], mig_parents: Mapping[str, int] | None = None
) -> tuple[list[int], str | None]:
    """The NVML indices of the GPUs CUDA_VISIBLE_DEVICES=value shows (a MIG instance's GPU), and a note if not all."""
    found, gpus = visible_gpus(value, [u or "" for u in uuids], mig_parents)
    if None in gpus:
        return list(range(len(uuids))), (
            f"CUDA_VISIBLE_DEVICES={value!r} names MIG instances NVML did not list: sampling every GPU"
        )
    note = _VISIBLE_NOTES.get(found.status)
    indices = list(dict.fromkeys(i for i in gpus if i is not None))
    return indices, None if note is None else note.format(value=value, problem=found.problem)


#: What each CUDA_VISIBLE_DEVICES status that hides GPUs means for the command.
_VISIBLE_NOTES = {
    "empty": "CUDA_VISIBLE_DEVICES is empty: the command sees no GPU",
    "duplicate": "CUDA_VISIBLE_DEVICES={value!r}: {problem}, so CUDA fails to start "
    '(error 101 "invalid device ordinal") and the command sees no GPU',
    "hides_all": "CUDA_VISIBLE_DEVICES={value!r}: {problem}, so the command sees no GPU",
    "invalid": "CUDA_VISIBLE_DEVICES={value!r}: {problem}; CUDA stops reading the list there",
}


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
        self.thread = threading.Thread(target=self._run, name="cuda-doctor-sampler", daemon=True)
        self._worker: Worker | None = None
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

    def start(self) -> None:
        self.thread.start()

    def stop(self, join_timeout: float | None = None) -> Series:
        """Stop sampling and return what was recorded; waits at most ``join_timeout`` seconds."""
        ended = time.monotonic()
        self._stop.set()
        limit = self._call_timeout + 1.0 if join_timeout is None else join_timeout
        if self.thread.ident is not None:  # started
            self.thread.join(limit)
        notes = dict(self._notes)
        if self.thread.is_alive():
            notes["join"] = f"the sampler did not stop within {limit:g} s and was abandoned"
        worker_cpu = self._worker.cpu_s if self._worker is not None else 0.0
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

    def _run(self) -> None:
        cpu_start = time.thread_time()
        self._worker = Worker("cuda-doctor-nvml")
        try:
            self._call(self._setup)  # the whole set-up under one time limit
            while self._error is None and not self._stop.is_set():
                tick_start = time.monotonic()
                self._tick()
                # Keep the cadence: sleep what is left of the interval, wake at once on stop.
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - tick_start)))
        except Overrun as exc:
            self._error = f"NVML {exc}; sampling stopped"
        except Exception as exc:  # a sampler bug must not cost the user their run
            self._error = f"sampling stopped: {type(exc).__name__}: {exc}"
        finally:
            self._shutdown()
            self._cpu_s += time.thread_time() - cpu_start

    def _call(self, fn: Callable[[], Any]) -> Any:
        assert self._worker is not None
        return self._worker.call(fn, self._call_timeout)

    def _setup(self) -> None:
        try:
            nvml = binding.load() if self._nvml is None else self._nvml
            binding.init(nvml)
        except binding.NvmlUnavailable as exc:
            self._error = f"NVML is not available: {exc.detail}"
            return
        self._nvml = nvml
        self._initialised = True
        try:
            count = int(nvml.nvmlDeviceGetCount())
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self._error = f"NVML could not list the GPUs: {binding.describe(exc)}"
            return
        uuids = [self._field(i, "uuid", binding.text, "nvmlDeviceGetUUID", h) for i, h in enumerate(handles)]
        value = self._env.get("CUDA_VISIBLE_DEVICES")
        mig = binding.mig_parents(nvml, handles) if value and "MIG-" in value else None
        indices, note = visible_indices(value, uuids, mig)
        if note:
            self._notes["visible"] = note
        if count == 0:
            self._error = "NVML found no GPU"
            return
        for i in indices:
            self._handles.append((i, handles[i]))
            self._gpus.append(self._static(i, handles[i], uuids[i]))

    def _static(self, index: int, h: Any, uuid: str | None) -> GpuInfo:
        mem = self._field(index, "memory_total", lambda m: round(m.total / _MIB, 1), "nvmlDeviceGetMemoryInfo", h)
        clock = self._field(index, "clock_max", float, "nvmlDeviceGetMaxClockInfo", h, self._nvml.NVML_CLOCK_SM)
        power = self._field(index, "power_limit", lambda mw: mw / 1000, "nvmlDeviceGetEnforcedPowerLimit", h)
        return GpuInfo(
            index=index,
            uuid=uuid,
            name=self._field(index, "name", binding.text, "nvmlDeviceGetName", h),
            memory_total_mib=mem,
            sm_clock_max_mhz=clock,
            power_limit_w=None if power is None else float(power),
        )

    def _field(
        self, gpu: int, key: str, convert: Callable[[Any], Any], functions: str | tuple[str, ...], *args: Any
    ) -> Any:
        """One NVML reading on the worker thread, converted; None (the reason noted once) when it fails."""
        if (gpu, key) in self._unsupported:
            return None
        answer = binding.ask(self._nvml, (functions,) if isinstance(functions, str) else functions, *args)
        if not isinstance(answer, Refusal):
            return convert(answer)
        if answer.not_supported:
            self._unsupported.add((gpu, key))  # asking again each tick would only cost time
        self._notes.setdefault(f"{key}:{answer.reason}", f"GPU {gpu}: {key} unavailable ({answer.reason})")
        return None

    def _tick(self) -> None:
        t = round(time.monotonic() - self._t0, 3)
        if self._pids is None or self._ticks % PID_REFRESH_TICKS == 0:  # the tree changes rarely
            self._pids = child_tree(self.pid, self._proc_root)
        self._ticks += 1
        pids = self._pids
        # one hand-off to the NVML thread per tick, not per call
        self._samples.extend(self._call(lambda: [self._read(t, i, h, pids) for i, h in self._handles]))

    def _read(self, t: float, index: int, h: Any, pids: frozenset[int]) -> Sample:
        nvml, same = self._nvml, _same
        util = self._field(index, "utilization", same, "nvmlDeviceGetUtilizationRates", h)
        mem = self._field(index, "memory", same, "nvmlDeviceGetMemoryInfo", h)
        rx = self._field(index, "pcie_rx", float, "nvmlDeviceGetPcieThroughput", h, nvml.NVML_PCIE_UTIL_RX_BYTES)
        tx = self._field(index, "pcie_tx", float, "nvmlDeviceGetPcieThroughput", h, nvml.NVML_PCIE_UTIL_TX_BYTES)
        on_gpu, child_mem, child_sm = self._child_use(index, h, pids)
        return Sample(
            t=t,
            gpu=index,
            sm_util=None if util is None else float(util.gpu),
            mem_util=None if util is None else float(util.memory),
            mem_used_mib=None if mem is None else round(mem.used / _MIB, 1),
            power_w=self._field(index, "power", lambda mw: round(mw / 1000, 1), "nvmlDeviceGetPowerUsage", h),
            sm_clock_mhz=self._field(index, "sm_clock", float, "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_SM),
            clock_event_reasons=self._field(index, "clock_event_reasons", int, _CLOCK_EVENT_REASONS, h),
            pcie_rx_mbps=None if rx is None else round(rx * 1024 / 1e6, 2),  # NVML gives KB/s
            pcie_tx_mbps=None if tx is None else round(tx * 1024 / 1e6, 2),
            temperature_c=self._field(
                index, "temperature", float, "nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU
            ),
            child_on_gpu=on_gpu,
            child_sm_util=child_sm,
            child_mem_used_mib=child_mem,
        )

    def _child_use(self, index: int, h: Any, pids: frozenset[int]) -> tuple[bool | None, float | None, float | None]:
        procs = self._field(index, "processes", _same, "nvmlDeviceGetComputeRunningProcesses", h)
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
        since = self._last_util_ts.get(index, 0)
        rows = binding.ask(self._nvml, ("nvmlDeviceGetProcessUtilization",), h, since)
        if isinstance(rows, Refusal):
            if rows.code == binding.NOT_FOUND:
                return 0.0  # no kernel of any process since the last reading
            if rows.not_supported:
                self._unsupported.add((index, "process_utilization"))
            self._notes.setdefault(
                f"putil:{rows.reason}", f"GPU {index}: per-process utilisation unavailable ({rows.reason})"
            )
            return None
        latest: dict[int, Any] = {}
        for row in rows:
            if row.pid in pids and (row.pid not in latest or row.timeStamp > latest[row.pid].timeStamp):
                latest[row.pid] = row
        if rows:
            self._last_util_ts[index] = max(int(r.timeStamp) for r in rows)
        return float(min(100, sum(int(r.smUtil) for r in latest.values())))

    def _shutdown(self) -> None:
        worker = self._worker
        if worker is None:
            return
        if self._initialised and worker.hung is None:
            try:
                error = worker.call(lambda: binding.shutdown(self._nvml), 1.0)
            except Overrun as exc:
                error = str(exc)
            if error is not None:
                self._notes.setdefault("shutdown", f"nvmlShutdown failed: {error}")
        worker.close()


def _same(value: Any) -> Any:
    return value

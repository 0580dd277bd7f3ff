"""Driver and GPU facts read through NVML (the ``pynvml`` module of nvidia-ml-py).

NVML is the library nvidia-smi itself is built on, so this is the primary source of
``driver.*``, ``nvml.version``, ``gpu.count`` and ``gpu[i].*``.  Loading it or asking it
can hang on a wedged driver, so the whole conversation runs in a daemon thread that is
abandoned after ``ctx.timeout``.  Every per-field call is separate: a field the GPU does
not support is recorded as null, any other failure as unknown with NVML's message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from cuda_doctor.facts import Facts, indexed
from cuda_doctor.probes.base import ProbeContext

MIB = 1024 * 1024

# NVML return codes (nvml.h); the numbers are stable across releases.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

# nvmlDeviceGetTotalEccErrors arguments and nvmlDeviceGetTemperature sensor (nvml.h).
_MEMORY_ERROR_TYPE_UNCORRECTED = 1
_VOLATILE_ECC = 0
_TEMPERATURE_GPU = 0

VERSION_MISMATCH_MESSAGE = "Failed to initialize NVML: Driver/library version mismatch"

#: nvmlClocksEventReason* bits (nvml.h) and the names the facts use for them.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}

#: The per-GPU facts this source records (without the ``gpu[i].`` prefix).
GPU_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "brand",
    "pci_bus_id",
    "compute_capability",
    "memory_total_mib",
    "memory_used_mib",
    "ecc_enabled",
    "ecc_uncorrected_volatile",
    "retired_pages_pending",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "persistence_mode",
    "mig_enabled",
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "clock_event_reasons",
    "clock_event_reason_names",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "processes",
    "process_count",
)

SYSTEM_FACTS: tuple[str, ...] = (
    "driver.version",
    "driver.cuda_version",
    "nvml.version",
    "gpu.count",
)


def reason_names(mask: int) -> list[str]:
    """``0x5`` → ``["gpu_idle", "sw_power_cap"]``; unnamed bits come out as ``bit_0x…``."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    known = sum(CLOCK_EVENT_REASONS)
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def cuda_version_text(value: int) -> str:
    """NVML's CUDA driver version integer: 13000 → "13.0", 12040 → "12.4"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def text(value: object) -> str:
    """Older bindings return ``bytes`` for names and UUIDs, newer ones ``str``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def mark_failed(facts: Facts, status: str, error: str, source: str) -> None:
    """Record a driver-level failure: the status, the message, and every fact it hides."""
    facts.set("driver.source", source)
    facts.set("driver.status", status)
    facts.set("driver.error", error)
    for name in SYSTEM_FACTS:
        facts.mark_unknown(name, error)
    facts.mark_unknown("gpu", error)


def nvml_failure(status: str, message: str) -> Facts:
    """The facts of an NVML conversation that failed: ``mark_failed`` plus NVML's own reason."""
    facts = Facts()
    mark_failed(facts, status, message, "nvml")
    facts.set("nvml.error", message)
    return facts


def collect_nvml(ctx: ProbeContext, nvml: Any = None) -> Facts:
    """Ask NVML about the driver and every GPU, within ``ctx.timeout`` seconds.

    ``nvml`` replaces the ``pynvml`` module (tests pass a fake GPU here).  A read started at
    process entry (``prefetch``) is taken over when it reads the same system.
    """
    read = take_prefetched(ctx) if nvml is None else None
    if read is None:
        read = NvmlRead(ctx, nvml).start()
    return read.facts(ctx.timeout)


class NvmlRead:
    """One conversation with NVML on a daemon thread: init, every reading, shutdown.

    The facts are handed over as soon as they are read; ``nvmlShutdown`` (about 5 ms on an
    H200) follows on the same thread, and nobody waits for it.  A read that overruns its
    deadline is abandoned: a daemon thread never keeps the process alive.
    """

    def __init__(self, ctx: ProbeContext, nvml: Any = None) -> None:
        self.ctx = ctx
        self.nvml = nvml
        self.ready = threading.Event()  # the facts (or the error) are there
        self.closed = threading.Event()  # the thread has finished, NVML shut down if it was opened
        self._facts: Facts | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cuda-doctor-nvml", daemon=True)

    def start(self) -> NvmlRead:
        with _open_lock:
            _open_reads.add(self)
        self._thread.start()
        return self

    def facts(self, timeout: float) -> Facts:
        if not self.ready.wait(timeout):
            return nvml_failure("error", f"NVML did not answer in {timeout:g} s")
        if self._error is not None:
            raise self._error  # not an Exception (those are recorded as facts)
        assert self._facts is not None
        return self._facts

    def _run(self) -> None:
        nvml = None
        try:
            nvml, self._facts = _open_and_read(self.ctx, self.nvml)
        except Exception as exc:  # a binding bug must still end as a recorded reason
            self._facts = nvml_failure("error", f"NVML query failed: {type(exc).__name__}: {exc}")
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            self._error = exc
        self.ready.set()
        try:
            if nvml is not None:
                _shutdown(nvml)
        finally:
            with _open_lock:
                _open_reads.discard(self)
            self.closed.set()


#: Reads whose conversation with NVML has not ended yet.
_open_reads: set[NvmlRead] = set()
_open_lock = threading.Lock()


def wait_closed(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds until every NVML read of this process has shut NVML down.

    For ``exec``: the program that replaces this process would otherwise inherit whatever
    NVML still has open.  False when a read is still open at the deadline (a wedged driver).
    """
    deadline = time.monotonic() + timeout
    with _open_lock:
        reads = list(_open_reads)
    return all(read.closed.wait(max(0.0, deadline - time.monotonic())) for read in reads)


#: Why nvmlShutdown failed in this process, if it did: the readings were already handed over,
#: so the oddity cannot become a fact; kept for debugging.
shutdown_errors: list[str] = []


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError as exc:
        shutdown_errors.append(str(exc))


def _open_and_read(ctx: ProbeContext, nvml: Any) -> tuple[Any, Facts]:
    """The facts, and the module to shut down (None when NVML was never opened)."""
    if nvml is None:
        try:
            import pynvml
        except ImportError as exc:
            return None, nvml_failure("library_not_found", f"nvidia-ml-py (module pynvml) cannot be imported: {exc}")
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return None, nvml_failure(*_init_failure(exc))
    except OSError as exc:  # some bindings let the loader's error through
        return None, nvml_failure("library_not_found", f"libnvidia-ml.so.1 could not be loaded: {exc}")
    facts = Facts()
    try:
        _read_everything(ctx, nvml, facts)
    except BaseException:
        _shutdown(nvml)
        raise
    return nvml, facts


# -- prefetch: the read started at process entry -----------------------------------------------

_prefetched: NvmlRead | None = None
_prefetch_lock = threading.Lock()


def prefetch(ctx: ProbeContext, nvml: Any = None) -> NvmlRead:
    """Start reading NVML now, for a probe that will ask later with a context like ``ctx``.

    Opening NVML is mostly waiting on the driver (about 15 ms on an H200), time the process
    can spend importing the command line and the rules instead.  ``nvml`` replaces the
    ``pynvml`` module, as in ``collect_nvml``.
    """
    global _prefetched
    if nvml is None:
        open_driver_early()
        # imported here, not on the read's thread: an import holds the GIL throughout.  A
        # binding that is missing or broken is not this function's to report: the read imports
        # it again and records why it failed.
        try:
            import pynvml  # noqa: F401
        except Exception as exc:
            early_errors.append(f"pynvml: {type(exc).__name__}: {exc}")
    with _prefetch_lock:
        _prefetched = NvmlRead(ctx, nvml).start()
        return _prefetched


def open_driver_early(load: Callable[[str], Any] | None = None) -> threading.Thread:
    """Open NVML through the C library itself, on a daemon thread, before ``pynvml`` is imported.

    NVML answers some questions much more slowly the first time a process asks.  Measured on
    an H200 machine: initialisation about 13 ms, opening a GPU 7 ms, its ECC error count 3 ms,
    ECC mode 2, power 2, clock-event reasons 1.5; later asks take microseconds.  Importing the
    binding takes 10-70 ms of Python there, so these first asks are made here meanwhile and the
    probe's own reads through pynvml find them answered.  pynvml's ``nvmlInit`` only counts one
    more user of the open library (NVML keeps a reference count); this early reference is
    never released, as the probing commands end the process right after.  The answers are
    thrown away: whatever fails here fails again through pynvml, which records the reason.
    ``load`` opens the library (tests pass a fake).
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
        library.nvmlDeviceGetTotalEccErrors(handle, _MEMORY_ERROR_TYPE_UNCORRECTED, _VOLATILE_ECC, ctypes.pointer(wide))
        library.nvmlDeviceGetEccMode(handle, ctypes.pointer(current), ctypes.pointer(pending))
        library.nvmlDeviceGetPowerUsage(handle, ctypes.pointer(narrow))
        library.nvmlDeviceGetCurrentClocksEventReasons(handle, ctypes.pointer(wide))
    except AttributeError as exc:
        early_errors.append(str(exc))
        return False
    return True


#: Why the early asks stopped (no driver library, or an older one): only for debugging, as
#: pynvml's own attempt is the one that counts.
early_errors: list[str] = []


def take_prefetched(ctx: ProbeContext) -> NvmlRead | None:
    """The prefetched read, once, if it reads what ``ctx`` asks about (the same file system)."""
    global _prefetched
    with _prefetch_lock:
        read, _prefetched = _prefetched, None
    if read is not None and read.ctx.root == ctx.root:
        return read
    return None


def _init_failure(exc: Exception) -> tuple[str, str]:
    code = getattr(exc, "value", None)
    if code == NVML_ERROR_LIBRARY_NOT_FOUND:
        return "library_not_found", f"libnvidia-ml.so.1 not found ({exc})"
    if code == NVML_ERROR_DRIVER_NOT_LOADED:
        return "not_loaded", f"NVIDIA kernel driver not loaded ({exc})"
    if code == NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "version_mismatch", VERSION_MISMATCH_MESSAGE
    return "error", f"Failed to initialize NVML: {exc}"


def _read_everything(ctx: ProbeContext, nvml: Any, facts: Facts) -> None:
    reader = _Reader(nvml, facts)
    facts.set("driver.source", "nvml")
    facts.set("nvml.error", None)
    reader.read("driver.version", ("nvmlSystemGetDriverVersion",), convert=text)
    reader.read(
        "driver.cuda_version",
        ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"),
        convert=lambda v: cuda_version_text(int(v)),
    )
    reader.read("nvml.version", ("nvmlSystemGetNVMLVersion",), convert=text)
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as exc:
        message = f"NVML could not count the GPUs: {exc}"
        facts.set("driver.status", "error")
        facts.set("driver.error", message)
        facts.mark_unknown("gpu.count", message)
        facts.mark_unknown("gpu", message)
        return
    facts.set("gpu.count", count)
    if count == 0:
        facts.set("driver.status", "no_gpu")
        facts.set("driver.error", "NVML reports no NVIDIA GPU")
        return
    facts.set("driver.status", "ok")
    facts.set("driver.error", None)
    if count == 1:
        _read_gpu(ctx, nvml, reader, 0)
        return
    # NVML is thread-safe and its calls release the GIL: read the GPUs side by side
    errors: list[BaseException] = []

    def read_one(index: int) -> None:
        try:
            _read_gpu(ctx, nvml, reader, index)
        except BaseException as exc:  # re-raised below, in the probe's own thread
            errors.append(exc)

    threads = [threading.Thread(target=read_one, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


#: NVML's nvmlBrandType_t, named as the NVIDIA Container Toolkit names brands in
#: NVIDIA_REQUIRE_CUDA ("brand=tesla,driver>=470,driver<471"): libnvidia-container's nvc_info.
BRANDS = {
    0: "unknown", 1: "quadro", 2: "tesla", 3: "nvs", 4: "grid", 5: "geforce", 6: "titan",
    7: "vapps", 8: "vpc", 9: "vcs", 10: "vws", 11: "cloudgaming", 12: "quadrortx",
    13: "nvidiartx", 14: "nvidia", 15: "geforcertx", 16: "titanrtx",
}  # fmt: skip
#: nvidia-smi's product_brand texts for the virtual-GPU brands.
SMI_BRANDS = {
    "nvidia virtual applications": "vapps", "nvidia virtual pc": "vpc",
    "nvidia virtual compute server": "vcs", "nvidia rtx virtual workstation": "vws",
    "nvidia cloud gaming": "cloudgaming",
}  # fmt: skip


def brand_name(value: object) -> str:
    if isinstance(value, int):
        return BRANDS.get(value, "unknown")
    label = str(value).strip().lower()
    return SMI_BRANDS.get(label, label.replace(" ", ""))


def _read_gpu(ctx: ProbeContext, nvml: Any, reader: _Reader, index: int) -> None:
    facts = reader.facts
    facts.set(indexed("gpu", index, "index"), index)
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        facts.mark_unknown(f"gpu[{index}]", f"NVML could not open GPU {index}: {exc}")
        return

    def read(field: str, names: Sequence[str], *args: Any, convert: Callable[[Any], Any]) -> None:
        reader.read(indexed("gpu", index, field), names, handle, *args, convert=convert)

    read("name", ("nvmlDeviceGetName",), convert=text)
    read("uuid", ("nvmlDeviceGetUUID",), convert=text)
    read("brand", ("nvmlDeviceGetBrand",), convert=lambda value: brand_name(int(value)))
    read("pci_bus_id", ("nvmlDeviceGetPciInfo",), convert=lambda info: text(info.busId))
    read(
        "compute_capability",
        ("nvmlDeviceGetCudaComputeCapability",),
        convert=lambda cc: f"{int(cc[0])}.{int(cc[1])}",
    )
    memory_total = indexed("gpu", index, "memory_total_mib")
    memory_used = indexed("gpu", index, "memory_used_mib")
    memory = _memory_info(nvml, reader, memory_total, handle)
    if memory is _FAILED:
        facts.mark_unknown(memory_used, facts.unknown[memory_total])
    else:
        facts.set(memory_total, _mib(memory, "total"))
        facts.set(memory_used, _mib(memory, "used"))
    read("ecc_enabled", ("nvmlDeviceGetEccMode",), convert=lambda mode: bool(mode[0]))
    read(
        "ecc_uncorrected_volatile",
        ("nvmlDeviceGetTotalEccErrors",),
        _MEMORY_ERROR_TYPE_UNCORRECTED,
        _VOLATILE_ECC,
        convert=int,
    )
    read("retired_pages_pending", ("nvmlDeviceGetRetiredPagesPendingStatus",), convert=bool)
    rows_pending = indexed("gpu", index, "remapped_rows_pending")
    rows_failure = indexed("gpu", index, "remapped_rows_failure")
    rows = reader.call(rows_pending, ("nvmlDeviceGetRemappedRows",), handle)
    if rows is _FAILED:
        facts.mark_unknown(rows_failure, facts.unknown[rows_pending])
    else:
        # (corrected rows, uncorrected rows, remapping pending, remapping failed)
        facts.set(rows_pending, None if rows is None else bool(rows[2]))
        facts.set(rows_failure, None if rows is None else bool(rows[3]))
    read("persistence_mode", ("nvmlDeviceGetPersistenceMode",), convert=bool)
    # A board without MIG support answers NOT_SUPPORTED: MIG is then certainly off.
    reader.read(
        indexed("gpu", index, "mig_enabled"),
        ("nvmlDeviceGetMigMode",),
        handle,
        convert=lambda mode: bool(mode[0]),
        not_supported=False,
    )
    read("pcie_gen_current", ("nvmlDeviceGetCurrPcieLinkGeneration",), convert=int)
    read("pcie_gen_max", ("nvmlDeviceGetMaxPcieLinkGeneration",), convert=int)
    read("pcie_width_current", ("nvmlDeviceGetCurrPcieLinkWidth",), convert=int)
    read("pcie_width_max", ("nvmlDeviceGetMaxPcieLinkWidth",), convert=int)
    read(
        "clock_event_reasons",
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        convert=int,
    )
    mask_name = indexed("gpu", index, "clock_event_reasons")
    names_name = indexed("gpu", index, "clock_event_reason_names")
    if mask_name in facts.values:
        mask = facts.values[mask_name]
        facts.set(names_name, None if mask is None else reason_names(mask))
    else:
        facts.mark_unknown(names_name, facts.unknown.get(mask_name, "clock event reasons unknown"))
    read("temperature_c", ("nvmlDeviceGetTemperature",), _TEMPERATURE_GPU, convert=int)
    read("power_w", ("nvmlDeviceGetPowerUsage",), convert=_watts)
    read("power_limit_w", ("nvmlDeviceGetEnforcedPowerLimit",), convert=_watts)
    read(
        "processes",
        ("nvmlDeviceGetComputeRunningProcesses",),
        convert=lambda procs: [_process(ctx, proc) for proc in procs],
    )
    procs_name = indexed("gpu", index, "processes")
    count_name = indexed("gpu", index, "process_count")
    if procs_name in facts.values:
        procs = facts.values[procs_name]
        facts.set(count_name, None if procs is None else len(procs))
    else:
        facts.mark_unknown(count_name, facts.unknown.get(procs_name, "processes unknown"))


def _memory_info(nvml: Any, reader: _Reader, name: str, handle: Any) -> Any:
    """Memory info v2 when the binding and driver have it: its "used" leaves out the memory
    the driver reserves (as nvidia-smi does); v1's "used" counts it."""
    version = getattr(nvml, "nvmlMemory_v2", None)
    v2_error = None
    if version is not None and hasattr(nvml, "nvmlDeviceGetMemoryInfo"):
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except Exception as exc:  # an older driver or binding (NVMLError, ctypes or type errors)
            v2_error = str(exc)  # ask with v1 below
    memory = reader.call(name, ("nvmlDeviceGetMemoryInfo",), handle)
    if memory is _FAILED and v2_error is not None and v2_error not in reader.facts.unknown[name]:
        reader.facts.mark_unknown(name, f"{reader.facts.unknown[name]} (v2: {v2_error})")
    return memory


def _mib(memory: Any, attr: str) -> int | None:
    if memory is None:
        return None
    return int(getattr(memory, attr)) // MIB


def _watts(milliwatts: Any) -> float:
    return round(int(milliwatts) / 1000.0, 3)


def _process(ctx: ProbeContext, proc: Any) -> dict[str, Any]:
    pid = int(proc.pid)
    used = getattr(proc, "usedGpuMemory", None)
    return {
        "pid": pid,
        "name": _process_name(ctx, pid),
        "used_mib": None if used is None else round(int(used) / MIB, 1),
    }


def _process_name(ctx: ProbeContext, pid: int) -> str | None:
    try:
        return ctx.file(f"/proc/{pid}/comm").read_text(errors="replace").strip() or None
    except OSError:
        # another PID namespace (container) or no permission: the name is simply not known
        return None


class _Failed:
    """Marker for a call whose failure is already recorded."""


_FAILED = _Failed()


class _Reader:
    """Calls one NVML function per fact and records the value, null or the reason."""

    def __init__(self, nvml: Any, facts: Facts) -> None:
        self.nvml = nvml
        self.facts = facts

    def call(self, name: str, functions: Sequence[str], *args: Any) -> Any:
        """The raw answer, ``None`` when not supported, or ``_FAILED`` (reason recorded)."""
        present = [fn for fn in functions if hasattr(self.nvml, fn)]
        if not present:
            self.facts.mark_unknown(name, f"this nvidia-ml-py has no {functions[0]}")
            return _FAILED
        for position, function in enumerate(present):
            try:
                return getattr(self.nvml, function)(*args)
            except self.nvml.NVMLError as exc:
                code = getattr(exc, "value", None)
                if code == NVML_ERROR_FUNCTION_NOT_FOUND and position + 1 < len(present):
                    continue  # the driver predates this entry point; try the older one
                if code == NVML_ERROR_NOT_SUPPORTED:
                    return None
                self.facts.mark_unknown(name, f"NVML {function}: {exc}")
                return _FAILED
            except Exception as exc:  # binding/driver skew surfaces as ctypes or type errors
                self.facts.mark_unknown(name, f"NVML {function}: {type(exc).__name__}: {exc}")
                return _FAILED
        return _FAILED  # unreachable: the last function either returns or records

    def read(
        self,
        name: str,
        functions: Sequence[str],
        *args: Any,
        convert: Callable[[Any], Any],
        not_supported: Any = None,
    ) -> None:
        raw = self.call(name, functions, *args)
        if raw is _FAILED:
            return
        if raw is None:
            self.facts.set(name, not_supported)
            return
        try:
            self.facts.set(name, convert(raw))
        except (TypeError, ValueError, AttributeError, IndexError) as exc:
            self.facts.mark_unknown(name, f"NVML answered {raw!r}, which could not be read: {exc}")

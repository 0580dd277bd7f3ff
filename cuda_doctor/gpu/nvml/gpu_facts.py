"""The driver and GPU facts read from an open NVML: ``driver.*``, ``nvml.version``, ``gpu.count``
and ``gpu[i].*``.  A reading the GPU does not support is null, any other failure unknown with
NVML's message.  The nvidia-smi fallback records the same names with the tables here."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from cuda_doctor.base.childside.clocks import CLOCK_EVENT_REASONS
from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import binding, fields, interconnect
from cuda_doctor.gpu.nvml.binding import Refusal

MIB = 1024 * 1024

#: The per-GPU facts this source records (without the ``gpu[i].`` prefix).
GPU_FIELDS: tuple[str, ...] = (
    "index", "name", "uuid", "brand", "pci_bus_id", "compute_capability", "memory_total_mib", "memory_used_mib",
    "ecc_enabled", "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
    "remapped_rows_failure", "recovery_action", "recovery_action_label", "persistence_mode", "mig_enabled",
    "mig_pending", "pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max",
    "clock_event_reasons", "clock_event_reason_names", "temperature_c", "power_w", "power_limit_w", "processes",
    "process_count", "fabric_state", "fabric_status", "nvlink_count", "nvlink_states", "nvlink_errors",
)  # fmt: skip

#: Facts the fast check leaves unasked: none of its rules reads them.
NOT_FAST: tuple[str, ...] = ("pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max")
NOT_FAST_REASON = "not read by the fast check: none of its rules needs the PCIe link"

#: nvmlDeviceGpuRecoveryAction_t, the values of NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; a later value is "other".
RECOVERY_ACTIONS: dict[int, str] = {0: "none", 1: "gpu_reset", 2: "node_reboot", 3: "drain_p2p", 4: "drain_and_reset"}

SYSTEM_FACTS: tuple[str, ...] = ("driver.version", "driver.cuda_version", "nvml.version", "gpu.count")


def reason_names(mask: int) -> list[str]:
    """``0x5`` → ``["gpu_idle", "sw_power_cap"]``; unnamed bits come out as ``bit_0x…``."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_REASONS)
    return names + [f"bit_{1 << n:#x}" for n in range(rest.bit_length()) if rest >> n & 1]


def cuda_version_text(value: int) -> str:
    """NVML's CUDA driver version integer: 13000 → "13.0", 12040 → "12.4"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def mark_failed(facts: Facts, status: str, error: str, source: str) -> None:
    """Record a driver-level failure: the status, the message, and every fact it hides."""
    facts.set("driver.source", source)
    facts.set("driver.status", status)
    facts.set("driver.error", error)
    facts.mark_all_unknown((*SYSTEM_FACTS, "gpu"), error)


def nvml_failure(status: str, message: str) -> Facts:
    """The facts of an NVML conversation that failed: ``mark_failed`` plus NVML's own reason."""
    facts = Facts()
    mark_failed(facts, status, message, "nvml")
    facts.set("nvml.error", message)
    return facts


def read_facts(ctx: ProbeContext, nvml: Any) -> Facts:
    """Every fact of the driver and the GPUs, from an NVML already initialised."""
    reader = _Reader(nvml, Facts())
    facts = reader.facts
    facts.set("driver.source", "nvml")
    facts.set("nvml.error", None)
    reader.read("driver.version", ("nvmlSystemGetDriverVersion",), convert=binding.text)
    reader.read(
        "driver.cuda_version",
        ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"),
        convert=lambda v: cuda_version_text(int(v)),
    )
    reader.read("nvml.version", ("nvmlSystemGetNVMLVersion",), convert=binding.text)
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as exc:
        message = f"NVML could not count the GPUs: {exc}"
        facts.set("driver.status", "error")
        facts.set("driver.error", message)
        facts.mark_all_unknown(("gpu.count", "gpu"), message)
        return facts
    facts.set("gpu.count", count)
    facts.set("driver.status", "ok" if count else "no_gpu")
    facts.set("driver.error", None if count else "NVML reports no NVIDIA GPU")
    if count == 0:
        return facts
    if count == 1:
        _read_gpu(ctx, nvml, reader, 0)
        return facts
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
    return facts


#: NVML's nvmlBrandType_t, named as NVIDIA_REQUIRE_CUDA names brands ("brand=tesla,driver>=470").
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

    gpu = functools.partial(indexed, "gpu", index)

    def read(field: str, names: Sequence[str], *args: Any, convert: Callable[[Any], Any]) -> None:
        reader.read(gpu(field), names, handle, *args, convert=convert)

    read("name", ("nvmlDeviceGetName",), convert=binding.text)
    read("uuid", ("nvmlDeviceGetUUID",), convert=binding.text)
    read("brand", ("nvmlDeviceGetBrand",), convert=lambda value: brand_name(int(value)))
    read("pci_bus_id", ("nvmlDeviceGetPciInfo",), convert=lambda info: binding.text(info.busId))
    read("compute_capability", ("nvmlDeviceGetCudaComputeCapability",), convert=lambda cc: f"{int(cc[0])}.{int(cc[1])}")
    memory_total, memory_used = gpu("memory_total_mib"), gpu("memory_used_mib")
    memory = _memory_info(nvml, reader, memory_total, handle)
    if memory is _FAILED:
        facts.mark_unknown(memory_used, facts.unknown[memory_total])
    else:
        facts.set(memory_total, None if memory is None else int(memory.total) // MIB)
        facts.set(memory_used, None if memory is None else int(memory.used) // MIB)
    # one round trip for the memory-health fields, the recovery action and the NVLink count
    answers = dict(zip(fields.GPU_BATCH, binding.field_values(nvml, handle, fields.GPU_BATCH), strict=True))
    # the newest field the driver answered (-1: none), for ``fields.gpu_lacks``
    newest = max((f for f, answer in answers.items() if not isinstance(answer, Refusal)), default=-1)
    _read_memory_health(reader, index, handle, answers, newest)
    _read_recovery_action(facts, index, answers[fields.GPU_RECOVERY_ACTION])
    read("persistence_mode", ("nvmlDeviceGetPersistenceMode",), convert=bool)
    _read_mig_mode(reader, index, handle)
    if ctx.fast:
        facts.mark_all_unknown(map(gpu, NOT_FAST), NOT_FAST_REASON)
    else:
        for field, function in (
            ("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
            ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            ("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
        ):
            read(field, (function,), convert=int)
    clock_names = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
    read("clock_event_reasons", clock_names, convert=int)
    reader.follow(gpu("clock_event_reason_names"), gpu("clock_event_reasons"), reason_names, "clock event reasons")
    read("temperature_c", ("nvmlDeviceGetTemperature",), binding.TEMPERATURE_GPU, convert=int)
    read("power_w", ("nvmlDeviceGetPowerUsage",), convert=_watts)
    read("power_limit_w", ("nvmlDeviceGetEnforcedPowerLimit",), convert=_watts)
    read("processes", ("nvmlDeviceGetComputeRunningProcesses",), convert=lambda ps: [_process(ctx, p) for p in ps])
    reader.follow(gpu("process_count"), gpu("processes"), len, "processes")
    interconnect.read_fabric(nvml, facts, index, handle)
    interconnect.read_nvlinks(nvml, facts, index, handle, answers[fields.NVLINK_LINK_COUNT], newest)


def _read_memory_health(reader: _Reader, index: int, handle: Any, answers: dict[int, Any], newest: int) -> None:
    """From the batch's field values, or the function of a field not answered; null where the GPU lacks it."""
    gpu = functools.partial(indexed, "gpu", index)

    def answered(field_id: int, fact: str, convert: Callable[[Any], Any]) -> bool:
        """Recorded from the field: its value, or null where the GPU lacks it."""
        answer = answers[field_id]
        if isinstance(answer, Refusal):
            if not fields.gpu_lacks(field_id, answer.not_supported, newest):
                return False
            answer = None
        facts.set(gpu(fact), None if answer is None else convert(answer))
        return True

    facts = reader.facts
    if not answered(fields.ECC_CURRENT, "ecc_enabled", bool):
        reader.read(gpu("ecc_enabled"), ("nvmlDeviceGetEccMode",), handle, convert=lambda mode: bool(mode[0]))
    if not answered(fields.ECC_DBE_VOLATILE, "ecc_uncorrected_volatile", int):
        args = (handle, binding.MEMORY_ERROR_TYPE_UNCORRECTED, binding.VOLATILE_ECC)
        reader.read(gpu("ecc_uncorrected_volatile"), ("nvmlDeviceGetTotalEccErrors",), *args, convert=int)
    if not answered(fields.RETIRED_PENDING, "retired_pages_pending", bool):
        reader.read(gpu("retired_pages_pending"), ("nvmlDeviceGetRetiredPagesPendingStatus",), handle, convert=bool)
    rows_pending, rows_failure = gpu("remapped_rows_pending"), gpu("remapped_rows_failure")
    pair = {fields.REMAPPED_PENDING: "remapped_rows_pending", fields.REMAPPED_FAILURE: "remapped_rows_failure"}
    if all(not isinstance(answers[f], Refusal) or fields.gpu_lacks(f, answers[f].not_supported, newest) for f in pair):
        for field_id, fact in pair.items():
            answered(field_id, fact, bool)
        return
    rows = reader.call(rows_pending, ("nvmlDeviceGetRemappedRows",), handle)
    if rows is _FAILED:
        facts.mark_unknown(rows_failure, facts.unknown[rows_pending])
    else:
        # (corrected rows, uncorrected rows, remapping pending, remapping failed)
        facts.set(rows_pending, None if rows is None else bool(rows[2]))
        facts.set(rows_failure, None if rows is None else bool(rows[3]))


def _read_recovery_action(facts: Facts, index: int, answer: Any) -> None:
    """From its field value only (there is no nvmlDeviceGetGpuRecoveryAction); never "none" when unanswered."""
    names = (indexed("gpu", index, "recovery_action"), indexed("gpu", index, "recovery_action_label"))
    if isinstance(answer, Refusal):
        why = (
            "the driver does not report a GPU recovery action (NVML field 230: not supported)"
            if answer.not_supported
            else f"the GPU recovery action could not be read: {answer.reason}"
        )
        facts.mark_all_unknown(names, why)
        return
    code = int(answer)
    facts.set(names[0], RECOVERY_ACTIONS.get(code, "other"))
    facts.set(names[1], f"{RECOVERY_ACTIONS.get(code, 'action')} ({code})")


def _read_mig_mode(reader: _Reader, index: int, handle: Any) -> None:
    """MIG mode now and after the next reset; NOT_SUPPORTED (no MIG on this board) means off."""
    enabled, pending = indexed("gpu", index, "mig_enabled"), indexed("gpu", index, "mig_pending")
    mode = reader.call(enabled, ("nvmlDeviceGetMigMode",), handle)
    if mode is _FAILED:
        reader.facts.mark_unknown(pending, reader.facts.unknown[enabled])
        return
    try:
        now, later = (False, False) if mode is None else (bool(mode[0]), bool(mode[1]))
    except (TypeError, IndexError) as exc:
        why = f"NVML answered {mode!r} for the MIG mode, which could not be read: {exc}"
        reader.facts.mark_all_unknown((enabled, pending), why)
        return
    reader.facts.set(enabled, now)
    reader.facts.set(pending, later)


def _memory_info(nvml: Any, reader: _Reader, name: str, handle: Any) -> Any:
    """Memory info v2 where there is one: its "used", as nvidia-smi's, leaves out what the driver reserves."""
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


def _watts(milliwatts: Any) -> float:
    return round(int(milliwatts) / 1000.0, 3)


def _process(ctx: ProbeContext, proc: Any) -> dict[str, Any]:
    pid = int(proc.pid)
    used = getattr(proc, "usedGpuMemory", None)
    try:
        name = ctx.file(f"/proc/{pid}/comm").read_text(errors="replace").strip() or None
    except OSError:  # another PID namespace (container) or no permission
        name = None
    return {"pid": pid, "name": name, "used_mib": None if used is None else round(int(used) / MIB, 1)}


#: What ``_Reader.call`` returns for a call whose failure is already recorded.
_FAILED = object()


class _Reader:
    """Calls one NVML function per fact and records the value, null or the reason."""

    def __init__(self, nvml: Any, facts: Facts) -> None:
        self.nvml = nvml
        self.facts = facts

    def call(self, name: str, functions: Sequence[str], *args: Any) -> Any:
        """The raw answer, ``None`` when not supported, or ``_FAILED`` (reason recorded)."""
        answer = binding.ask(self.nvml, functions, *args)
        if not isinstance(answer, Refusal):
            return answer
        if answer.not_supported:
            return None
        self.facts.mark_unknown(name, answer.reason)
        return _FAILED

    def read(self, name: str, functions: Sequence[str], *args: Any, convert: Callable[[Any], Any]) -> None:
        """The converted answer, null when not supported, or unknown with the reason."""
        raw = self.call(name, functions, *args)
        if raw is _FAILED:
            return
        if raw is None:
            self.facts.set(name, None)
            return
        try:
            self.facts.set(name, convert(raw))
        except (TypeError, ValueError, AttributeError, IndexError) as exc:
            self.facts.mark_unknown(name, f"NVML answered {raw!r}, which could not be read: {exc}")

    def follow(self, name: str, source: str, convert: Callable[[Any], Any], what: str) -> None:
        """``name`` made from the fact ``source`` just read: null where it is null, unknown where it is."""
        if source in self.facts.values:
            value = self.facts.values[source]
            self.facts.set(name, None if value is None else convert(value))
        else:
            self.facts.mark_unknown(name, self.facts.unknown.get(source, f"{what} unknown"))

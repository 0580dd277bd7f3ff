"""Driver and GPU facts from ``nvidia-smi``, under the NVML probe's names, when NVML cannot be
loaded here.  The XML report is found within whatever else nvidia-smi printed (kept in
``driver.smi_notes``); when it cannot be read, the basic facts come from ``--query-gpu`` CSV."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

from cuda_doctor.base.process import CommandResult, run_command
from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml.binding import VERSION_MISMATCH_MESSAGE
from cuda_doctor.gpu.nvml.gpu_facts import GPU_FIELDS, SYSTEM_FACTS, brand_name, mark_failed, reason_names

SOURCE = "nvidia-smi"
CSV_FIELDS: tuple[str, ...] = ("index", "uuid", "compute_cap")
#: The --query-gpu fields read when the XML report cannot be; older drivers refuse NEWER_CSV_FIELDS.
FALLBACK_FIELDS: tuple[str, ...] = (
    "index", "name", "uuid", "driver_version", "memory.total", "pci.bus_id", "compute_cap", "persistence_mode",
    "ecc.mode.current", "mig.mode.current", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
    "pcie.link.width.max", "temperature.gpu", "power.draw", "clocks_event_reasons.active",
)  # fmt: skip
NEWER_CSV_FIELDS = frozenset({"compute_cap", "clocks_event_reasons.active"})
_END_TAG = "</nvidia_smi_log>"
#: C0 controls other than tab, newline and carriage return: not allowed in XML 1.0.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufeff\ufffe\uffff]")
_NOTE_LINES = 5
_NOTE_CHARS = 200

# Suffixes of <clocks_event_reason_*> (and the older <clocks_throttle_reason_*>) → nvml.h bit.
_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100,
}  # fmt: skip
_REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")

#: A number as nvidia-smi prints one; a field of more digits than any reading has is no number.
_NUMBER = re.compile(r"^\s*(-?\d{1,30}(?:\.\d{1,30})?)(?![\d.])")
#: The most GPUs read from one report: more than any machine has (the rest are named in a note).
MAX_GPUS = 1024
_NOT_A_VALUE = {"N/A", "Not Supported", "Unknown Error", "Insufficient Permissions"}
_TRUE = {"enabled", "yes", "active", "on"}
_FALSE = {"disabled", "no", "not active", "off"}


# -- small readers of nvidia-smi's text values -----------------------------------------------
def _value(node: ET.Element | None, *paths: str) -> str | None:
    """The stripped text at the first of ``paths`` that has a value, or None ("N/A" and the like are none)."""
    for path in paths:
        found = None if node is None else node.find(path)
        raw = None if found is None or found.text is None else found.text.strip()
        if raw and raw.strip("[]") not in _NOT_A_VALUE:
            return raw
    return None


def _number(raw: str | None) -> int | float | None:
    """``"143771 MiB"`` → 143771, ``"78.02 W"`` → 78.02, ``"16x"`` → 16."""
    match = None if raw is None else _NUMBER.match(raw)
    if match is None:
        return None
    digits = match.group(1)
    return float(digits) if "." in digits else int(digits)


def _integer(raw: str | None) -> int | None:
    number = _number(raw)
    return None if number is None else int(number)


def _flag(raw: str | None) -> bool | None:
    lowered = (raw or "").lower()
    if lowered in _TRUE or lowered in _FALSE:
        return lowered in _TRUE
    return None


def _smi_facts() -> Facts:
    facts = Facts()
    facts.set("driver.source", SOURCE)
    return facts


def _set_gpu_count(facts: Facts, count: int) -> None:
    facts.set("gpu.count", count)
    facts.set("driver.status", "ok" if count else "no_gpu")
    facts.set("driver.error", None if count else "nvidia-smi lists no GPU")


# -- nvidia-smi -q -x ------------------------------------------------------------------------
def find_document(text: str) -> tuple[str | None, list[str]]:
    """The XML document in nvidia-smi's output (None when there is none), and the lines printed
    around it; characters XML 1.0 cannot hold are dropped first."""
    clean = _NOT_XML.sub("", text)
    starts = [i for i in (clean.find("<?xml"), clean.find("<nvidia_smi_log")) if i >= 0]
    if not starts:
        return None, _note_lines(clean)
    start = min(starts)
    end = clean.rfind(_END_TAG)
    if end < start:  # cut short: what is there, for the parser to refuse with where it stops
        return clean[start:], _note_lines(clean[:start])
    end += len(_END_TAG)
    return clean[start:end], _note_lines(clean[:start]) + _note_lines(clean[end:])


def _note_lines(text: str) -> list[str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    kept = [line if len(line) <= _NOTE_CHARS else line[:_NOTE_CHARS] + "…" for line in lines[:_NOTE_LINES]]
    if len(lines) > _NOTE_LINES:
        kept.append(f"… and {len(lines) - _NOTE_LINES} more line(s)")
    return kept


def read_query_xml(text: str) -> tuple[Facts | None, str | None, list[str]]:
    """``nvidia-smi -q -x`` output → (facts, None, notes), or (None, what was wrong, notes)."""
    import xml.etree.ElementTree as ET  # only when there is XML to read (fast start-up)

    document, notes = find_document(text)
    if document is None:
        shown = f": {notes[0]!r}" if notes else " (empty output)"
        return None, f"nvidia-smi -q -x printed no XML report{shown}", notes
    try:
        root = ET.fromstring(document)
    except ET.ParseError as exc:
        cut = "" if _END_TAG in document else ", cut short"
        return None, f"nvidia-smi -q -x printed output that is not valid XML ({exc}{cut})", notes
    if root.tag != "nvidia_smi_log":
        return None, f"nvidia-smi -q -x printed <{root.tag}>, not <nvidia_smi_log>", notes
    return _parse_log(root), None, notes


def parse_query_xml(text: str) -> Facts:
    """Facts from ``nvidia-smi -q -x``; output that cannot be read leaves them unknown with why."""
    facts, problem, notes = read_query_xml(text)
    if facts is None:
        facts = _smi_facts()
        facts.mark_all_unknown(("driver.status", *SYSTEM_FACTS, "gpu"), problem or "nvidia-smi -q -x could not be read")
    facts.set("driver.smi_notes", notes)
    return facts


def _parse_log(root: ET.Element) -> Facts:
    facts = _smi_facts()
    _set_or_unknown(facts, "driver.version", _value(root, "driver_version"), "no <driver_version>")
    _set_or_unknown(facts, "driver.cuda_version", _value(root, "cuda_version"), "no <cuda_version>")
    facts.mark_unknown("nvml.version", "nvidia-smi does not report the NVML version")
    gpus = root.findall("gpu")
    if len(gpus) > MAX_GPUS:
        note = f"nvidia-smi listed {len(gpus)} GPUs, more than any machine has: only the first {MAX_GPUS} were read"
        facts.set("driver.smi_gpus_not_read", len(gpus) - MAX_GPUS)
        facts.set("driver.smi_limit_note", note)
        gpus = gpus[:MAX_GPUS]
    _set_gpu_count(facts, len(gpus))
    for index, gpu in enumerate(gpus):
        _parse_gpu(facts, index, gpu)
    return facts


def _set_or_unknown(facts: Facts, name: str, value: Any, reason: str) -> None:
    if value is None:
        facts.mark_unknown(name, reason)
    else:
        facts.set(name, value)


def _parse_gpu(facts: Facts, index: int, gpu: ET.Element) -> None:
    def put(field: str, value: Any) -> None:
        facts.set(indexed("gpu", index, field), value)

    put("index", index)
    put("name", _value(gpu, "product_name"))
    put("uuid", _value(gpu, "uuid"))
    brand = _value(gpu, "product_brand")
    put("brand", brand_name(brand) if brand else None)
    put("pci_bus_id", _value(gpu, "pci/pci_bus_id") or gpu.get("id"))
    facts.mark_unknown(indexed("gpu", index, "compute_capability"), "not in nvidia-smi -q -x output")
    put("memory_total_mib", _integer(_value(gpu, "fb_memory_usage/total")))
    put("memory_used_mib", _integer(_value(gpu, "fb_memory_usage/used")))
    put("ecc_enabled", _flag(_value(gpu, "ecc_mode/current_ecc")))
    put("ecc_uncorrected_volatile", _uncorrected_volatile(gpu.find("ecc_errors/volatile")))
    put(
        "retired_pages_pending",
        _flag(_value(gpu, "retired_pages/pending_retirement", "retired_pages/pending_blacklist")),
    )
    put("remapped_rows_pending", _flag(_value(gpu, "remapped_rows/remapped_row_pending")))
    put("remapped_rows_failure", _flag(_value(gpu, "remapped_rows/remapped_row_failure")))
    _parse_recovery_action(facts, index, gpu)
    put("persistence_mode", _flag(_value(gpu, "persistence_mode")))
    # no MIG support (N/A, or no <mig_mode> on old drivers): MIG is off, no change pending
    put("mig_enabled", bool(_flag(_value(gpu, "mig_mode/current_mig"))))
    put("mig_pending", bool(_flag(_value(gpu, "mig_mode/pending_mig"))))
    link = gpu.find("pci/pci_gpu_link_info")
    put("pcie_gen_current", _integer(_value(link, "pcie_gen/current_link_gen")))
    put("pcie_gen_max", _integer(_value(link, "pcie_gen/max_link_gen")))
    put("pcie_width_current", _integer(_value(link, "link_widths/current_link_width")))
    put("pcie_width_max", _integer(_value(link, "link_widths/max_link_width")))
    _parse_clock_reasons(facts, index, gpu)
    put("temperature_c", _integer(_value(gpu, "temperature/gpu_temp")))
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")  # drivers before 535
    put("power_w", _number(_value(power, "power_draw", "average_power_draw", "instant_power_draw")))
    put("power_limit_w", _number(_value(power, "current_power_limit", "enforced_power_limit", "power_limit")))
    processes = _processes(gpu.find("processes"))
    put("processes", processes)
    put("process_count", len(processes))
    _parse_fabric(facts, index, gpu)
    for field in ("nvlink_count", "nvlink_states", "nvlink_errors"):
        facts.mark_unknown(indexed("gpu", index, field), "nvidia-smi -q -x does not list the NVLinks (NVML does)")


#: <fabric><state> texts (letters only, lower case) → the NVML probe's names ("N/A" on a PCIe board).
_FABRIC_STATES = {
    "na": "not_supported", "notsupported": "not_supported", "notstarted": "not_started",
    "inprogress": "in_progress", "completed": "completed",
}  # fmt: skip


def _parse_fabric(facts: Facts, index: int, gpu: ET.Element) -> None:
    """``fabric_state`` / ``fabric_status``; null without a Fabric section (drivers before 525)."""
    state_name, status_name = indexed("gpu", index, "fabric_state"), indexed("gpu", index, "fabric_status")
    raw_state = gpu.findtext("fabric/state")
    state = None if raw_state is None else _FABRIC_STATES.get(re.sub(r"[^a-z]", "", raw_state.lower()), "other")
    facts.set(state_name, state)
    status = _value(gpu, "fabric/status") if state == "completed" else None
    facts.set(status_name, "success" if status is not None and status.lower() == "success" else status)


#: <gpu_recovery_action> texts → NVML's action names; anything else is "other", shown verbatim.
_RECOVERY_TEXTS = {
    "none": "none", "gpureset": "gpu_reset", "reset": "gpu_reset", "nodereboot": "node_reboot",
    "reboot": "node_reboot", "drainp2p": "drain_p2p", "drainandreset": "drain_and_reset",
}  # fmt: skip


def _parse_recovery_action(facts: Facts, index: int, gpu: ET.Element) -> None:
    names = (indexed("gpu", index, "recovery_action"), indexed("gpu", index, "recovery_action_label"))
    found = gpu.find("gpu_recovery_action")
    raw = (found.text or "").strip() if found is not None else None
    if not raw or raw.strip("[]") in _NOT_A_VALUE:
        why = (
            "nvidia-smi -q -x has no <gpu_recovery_action>: this driver does not report it"
            if raw is None
            else f"nvidia-smi reports the GPU recovery action as {raw or 'empty'}"
        )
        facts.mark_all_unknown(names, why)
        return
    facts.set(names[0], _RECOVERY_TEXTS.get(re.sub(r"[^a-z0-9]", "", raw.lower()), "other"))
    facts.set(names[1], raw)


def _uncorrected_volatile(volatile: ET.Element | None) -> int | None:
    if volatile is None:
        return None
    if volatile.find("double_bit") is not None:  # pre-Ampere layout: single_bit / double_bit totals
        return _integer(_value(volatile, "double_bit/total"))
    counts = [_integer(_value(volatile, child.tag)) for child in volatile if "uncorrectable" in child.tag]
    known = [count for count in counts if count is not None]
    return sum(known) if known else None


def _parse_clock_reasons(facts: Facts, index: int, gpu: ET.Element) -> None:
    mask_name = indexed("gpu", index, "clock_event_reasons")
    names_name = indexed("gpu", index, "clock_event_reason_names")
    section = gpu.find("clocks_event_reasons")
    if section is None:
        section = gpu.find("clocks_throttle_reasons")  # drivers before 535
    if section is None:
        facts.mark_all_unknown((mask_name, names_name), "nvidia-smi -q -x has no clock event reasons")
        return
    mask = 0
    seen = False
    for child in section:
        suffix = child.tag
        for prefix in _REASON_PREFIXES:
            suffix = suffix.removeprefix(prefix)
        bit = _REASON_BITS.get(suffix)
        state = _flag(_value(section, child.tag))
        if bit is None or state is None:
            continue
        seen = True
        if state:
            mask |= bit
    facts.set(mask_name, mask if seen else None)
    facts.set(names_name, reason_names(mask) if seen else None)


def _processes(section: ET.Element | None) -> list[dict[str, Any]]:
    if section is None:
        return []
    found: list[dict[str, Any]] = []
    for info in section.findall("process_info"):
        kind = _value(info, "type")
        if kind is not None and "C" not in kind:
            continue  # graphics-only clients; NVML's compute list does not hold them either
        pid = _integer(_value(info, "pid"))
        if pid is None:
            continue
        used = _number(_value(info, "used_memory"))
        found.append(
            {"pid": pid, "name": _value(info, "process_name"), "used_mib": None if used is None else float(used)}
        )
    return found


# -- nvidia-smi --query-gpu=... --format=csv ---------------------------------------------
def parse_query_gpu_csv(text: str, fields: tuple[str, ...] = CSV_FIELDS) -> dict[int, dict[str, str | None]]:
    """Rows of ``--query-gpu`` CSV keyed by GPU index; "[N/A]" cells become None.  A header row
    names the columns (units such as `` [MiB]`` dropped); without one, ``fields`` gives them."""
    rows: dict[int, dict[str, str | None]] = {}
    names = list(fields)
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[0].split(",")[0].strip() == "index":
        names = [re.sub(r"\s*\[.*\]$", "", cell.strip()) for cell in lines[0].split(",")]
        lines = lines[1:]
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(names):
            raise ValueError(f"expected {len(names)} columns, got {len(cells)}: {line.strip()!r}")
        row: dict[str, str | None] = {
            name: None if cell.strip("[]") in {"N/A", "Not Supported"} else cell
            for name, cell in zip(names, cells, strict=True)
        }
        index = row.get("index")
        if index is None or not index.isdigit():
            raise ValueError(f"row without a GPU index: {line.strip()!r}")
        rows[int(index)] = row
    return rows


# -- running nvidia-smi --------------------------------------------------------------------
def collect_nvidia_smi(ctx: ProbeContext) -> Facts:
    """Run ``nvidia-smi`` (found on ``ctx.env``'s PATH) within ``ctx.timeout`` per call."""
    facts = _smi_facts()
    result = run_command(["nvidia-smi", "-q", "-x"], timeout=ctx.timeout, env=ctx.env)
    if result.timed_out or result.returncode is None:
        _record_failure(facts, result)
        return facts
    parsed, problem, notes = read_query_xml(result.stdout)
    if parsed is None and not result.ok and "<nvidia_smi_log" not in result.stdout:
        _record_failure(facts, result)  # nvidia-smi's own error message, and no report
        return facts
    if not result.ok:
        notes.extend([*_note_lines(result.stderr), f"nvidia-smi -q -x exited with status {result.returncode}"])
    if parsed is None:
        parsed = _from_query_gpu(ctx, problem or "nvidia-smi -q -x could not be read", notes)
    facts.merge(parsed)
    facts.set("driver.smi_notes", notes)
    count = facts.get("gpu.count")
    if isinstance(count, int) and count > 0 and "gpu[0].compute_capability" in facts.unknown:
        _add_compute_capability(ctx, facts, count)
    return facts


def _from_query_gpu(ctx: ProbeContext, problem: str, notes: list[str]) -> Facts:
    """The facts ``--query-gpu`` gives when ``-q -x`` could not be read, the others unknown with
    ``problem``; when that fails too, the driver's state is an error: nvidia-smi answered."""
    rows, csv_problem = _query_rows(ctx)
    facts = _smi_facts()
    if rows is None:
        error = f"nvidia-smi answered, but neither its report could be read ({problem}) nor --query-gpu ({csv_problem})"
        mark_failed(facts, "error", error, SOURCE)
        return facts
    notes.append(f"{problem}: the GPU facts come from nvidia-smi --query-gpu")
    why = f"{problem}; nvidia-smi --query-gpu does not give it"
    facts.mark_all_unknown(SYSTEM_FACTS, why)
    first = rows[min(rows)] if rows else {}
    _set_or_unknown(facts, "driver.version", first.get("driver_version"), why)
    _set_gpu_count(facts, len(rows))
    for index in sorted(rows):
        _csv_gpu(facts, index, rows[index], why)
    return facts


def _query_rows(ctx: ProbeContext) -> tuple[dict[int, dict[str, str | None]] | None, str | None]:
    fields = FALLBACK_FIELDS
    for _ in range(2):  # a driver that refuses a newer field is asked again without them
        argv = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"]
        result = run_command(argv, timeout=ctx.timeout, env=ctx.env)
        if result.ok:
            try:
                return parse_query_gpu_csv(result.stdout, fields), None
            except ValueError as exc:
                return None, f"unexpected CSV: {exc}"
        if "is not a valid field" not in result.stdout + result.stderr or fields is not FALLBACK_FIELDS:
            return None, result.error or "nvidia-smi --query-gpu failed"
        fields = tuple(f for f in FALLBACK_FIELDS if f not in NEWER_CSV_FIELDS)
    return None, "nvidia-smi --query-gpu failed"


#: --query-gpu field → (gpu[i] fact, how its text is read).
_CSV_FACTS: dict[str, tuple[str, Any]] = {
    "name": ("name", str),
    "uuid": ("uuid", str),
    "pci.bus_id": ("pci_bus_id", str),
    "compute_cap": ("compute_capability", str),
    "memory.total": ("memory_total_mib", _integer),
    "persistence_mode": ("persistence_mode", _flag),
    "ecc.mode.current": ("ecc_enabled", _flag),
    "mig.mode.current": ("mig_enabled", lambda raw: bool(_flag(raw))),
    "pcie.link.gen.current": ("pcie_gen_current", _integer),
    "pcie.link.gen.max": ("pcie_gen_max", _integer),
    "pcie.link.width.current": ("pcie_width_current", _integer),
    "pcie.link.width.max": ("pcie_width_max", _integer),
    "temperature.gpu": ("temperature_c", _integer),
    "power.draw": ("power_w", _number),
}


def _csv_gpu(facts: Facts, index: int, row: dict[str, str | None], why: str) -> None:
    facts.set(indexed("gpu", index, "index"), index)
    for field, (name, read) in _CSV_FACTS.items():
        if field in row:
            raw = row[field]
            facts.set(indexed("gpu", index, name), None if raw is None else read(raw))
    mask = row.get("clocks_event_reasons.active")
    if mask is not None and re.fullmatch(r"0x[0-9a-fA-F]+", mask):
        facts.set(indexed("gpu", index, "clock_event_reasons"), int(mask, 16))
        facts.set(indexed("gpu", index, "clock_event_reason_names"), reason_names(int(mask, 16)))
    for field in GPU_FIELDS:
        facts.mark_unknown(indexed("gpu", index, field), why)


def _record_failure(facts: Facts, result: CommandResult) -> None:
    error = result.error or "nvidia-smi failed"
    if result.returncode is None and not result.timed_out and "not found on PATH" in error:
        # nothing ran: leave the driver's state open for other sources
        facts.mark_all_unknown(("driver.status", *SYSTEM_FACTS, "gpu"), error)
        return
    # what it printed counts only when it exited on its own
    output = "" if result.returncode is None else f"{result.stdout}\n{result.stderr}"
    status, message = "error", error
    if result.cut:  # not NVIDIA's nvidia-smi as it should be: its output was never read
        status = "output_flood"
    elif result.timed_out:  # it exists, so a driver is installed: a hang is the driver's or GPU's
        status = "not_answering"
    elif "version mismatch" in output:
        status, message = "version_mismatch", VERSION_MISMATCH_MESSAGE
    elif "couldn't communicate with the NVIDIA driver" in output:
        status, message = "not_loaded", _line_with(output, "couldn't communicate")
    elif "No devices were found" in output:
        status, message = "no_gpu", "nvidia-smi: No devices were found"
    elif "libnvidia-ml" in output or "NVML Shared Library Not Found" in output:
        status, message = "library_not_found", _line_with(output, "libnvidia-ml", error)
    mark_failed(facts, status, message, SOURCE)
    if status == "no_gpu":
        facts.set("gpu.count", 0)


def _line_with(output: str, needle: str, default: str | None = None) -> str:
    for line in output.splitlines():
        if needle in line:
            return line.strip()
    return default or needle


def _add_compute_capability(ctx: ProbeContext, facts: Facts, count: int) -> None:
    argv = ["nvidia-smi", f"--query-gpu={','.join(CSV_FIELDS)}", "--format=csv,noheader"]
    result = run_command(argv, timeout=ctx.timeout, env=ctx.env)
    names = [indexed("gpu", index, "compute_capability") for index in range(count)]
    if not result.ok:
        facts.mark_all_unknown(names, result.error or "nvidia-smi --query-gpu failed")
        return
    try:
        rows = parse_query_gpu_csv(result.stdout)
    except ValueError as exc:
        facts.mark_all_unknown(names, f"nvidia-smi --query-gpu printed unexpected CSV: {exc}")
        return
    by_uuid = {row.get("uuid"): row for row in rows.values()}
    for index, name in enumerate(names):
        # -q -x lists GPUs in the same (PCI) order, but the UUID is the safer key
        row = by_uuid.get(facts.get(indexed("gpu", index, "uuid"))) or rows.get(index)
        capability = None if row is None else row.get("compute_cap")
        if capability is None:
            facts.mark_unknown(name, f"nvidia-smi --query-gpu gave no compute_cap for GPU {index}")
        else:
            facts.set(name, capability)

"""Interconnect facts: NVLink state per link (NVML) and the ``nvidia-smi topo -m`` matrix (which
numbers GPUs in PCI bus order; on machines of identical GPUs that is the CUDA order)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from cuda_doctor.base.process import run_command
from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import binding
from cuda_doctor.gpu.nvml.binding import Refusal

_DEVICE_COLUMN = re.compile(r"^(GPU|NIC)\d+$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class NvmlTopology:
    """What the NCCL probe learns from its one conversation with NVML."""

    uuids: tuple[str, ...] | None  # every GPU's ("" where unreadable); None: NVML could not list them
    mig_parents: dict[str, int] | None  # MIG instance UUID → its GPU's index; None: not known
    facts: Facts  # nvlink[i].*, or why they are unknown ("nvlink")


def read_nvml(nvml: Any) -> NvmlTopology:
    """Open NVML once: the GPUs (to read CUDA_VISIBLE_DEVICES against) and their NVLink facts."""
    facts = Facts()
    try:
        binding.init(nvml)
    except binding.NvmlUnavailable as exc:  # NVML missing or driver not loaded: a reason, not a crash
        facts.mark_unknown("nvlink", f"NVML: {exc}")
        return NvmlTopology(None, None, facts)
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
        uuids = tuple(_uuid(nvml, handle) for handle in handles)
        found = NvmlTopology(uuids, binding.mig_parents(nvml, handles), nvlink_facts(nvml, handles))
    except Exception as exc:
        facts.mark_unknown("nvlink", f"NVML: {binding.describe(exc)}")
        found = NvmlTopology(None, None, facts)
    error = binding.shutdown(nvml)
    if error is not None:
        found.facts.mark_unknown("nvlink.shutdown", f"NVML shutdown: {error}")
    return found


def _uuid(nvml: Any, handle: Any) -> str:
    uuid = binding.ask(nvml, ("nvmlDeviceGetUUID",), handle)
    return "" if isinstance(uuid, Refusal) else binding.text(uuid)


def nvlink_facts(nvml: Any, handles: list[Any]) -> Facts:
    """``nvlink[i].{active_links,supported,version_raw}``; the whole family unknown when the binding fails."""
    facts = Facts()
    max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    for i, handle in enumerate(handles):
        active, supported = 0, True
        version: Any = None
        for link in range(max_links):
            state = binding.ask(nvml, ("nvmlDeviceGetNvLinkState",), handle, link)
            if isinstance(state, Refusal):
                if state.code is None:  # not an NVML answer: nothing about the links is known
                    facts.mark_unknown("nvlink", state.reason)
                    return facts
                supported = not (link == 0 and state.not_supported)  # False: a PCIe-only board
                break  # links are numbered densely; the first missing one ends the list
            if state == enabled:
                active += 1
                if version is None:
                    version = binding.ask(nvml, ("nvmlDeviceGetNvLinkVersion",), handle, link)
        facts.set(indexed("nvlink", i, "supported"), supported)
        facts.set(indexed("nvlink", i, "active_links"), active)
        # NVML's version numbering is not the marketing generation: kept raw
        if isinstance(version, Refusal):
            facts.mark_unknown(indexed("nvlink", i, "version_raw"), version.reason)
        else:
            facts.set(indexed("nvlink", i, "version_raw"), None if version is None else int(version))
    return facts


def parse_topo_matrix(text: str) -> tuple[str, dict[str, str]]:
    """``nvidia-smi topo -m`` → (the matrix without its legend, {"0-1": "NV18", …})."""
    lines = (_ANSI.sub("", ln).rstrip() for ln in text.splitlines())
    matrix_lines = itertools.takewhile(lambda ln: not ln.strip().startswith("Legend"), lines)
    raw = "\n".join(matrix_lines).strip("\n")  # the lines are right-stripped: blank ones are empty
    if not raw:
        return raw, {}
    header, *rows = raw.split("\n")
    columns = [c for c in header.split() if _DEVICE_COLUMN.match(c)]
    pairs: dict[str, str] = {}
    for ln in rows:
        cells = ln.split()
        if not cells or not cells[0].startswith("GPU") or not _DEVICE_COLUMN.match(cells[0]):
            continue
        row = int(cells[0][3:])
        for name, cell in zip(columns, cells[1 : 1 + len(columns)], strict=False):
            if name.startswith("GPU") and int(name[3:]) > row:
                pairs[f"{row}-{int(name[3:])}"] = cell
    return raw, pairs


def topo_facts(ctx: ProbeContext) -> Facts:
    """``nccl.topo_matrix`` (raw) and ``nccl.link_types`` from ``nvidia-smi topo -m``."""
    facts = Facts()
    result = run_command(["nvidia-smi", "topo", "-m"], timeout=ctx.timeout, env=ctx.env)
    if not result.ok:
        reason = result.error or "nvidia-smi topo -m failed"
        facts.mark_all_unknown(("nccl.topo_matrix", "nccl.link_types"), reason)
        return facts
    raw, pairs = parse_topo_matrix(result.stdout)
    facts.set("nccl.topo_matrix", raw)
    if pairs or "GPU1" not in raw:
        facts.set("nccl.link_types", pairs)
    else:
        facts.mark_unknown("nccl.link_types", "could not parse nvidia-smi topo -m")
    return facts

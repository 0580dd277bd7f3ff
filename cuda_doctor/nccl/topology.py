"""Interconnect facts: NVLink state per link (NVML) and the ``nvidia-smi topo -m`` matrix.

Peer-to-peer access per GPU pair needs torch and a CUDA context, so it is measured inside
the all-reduce child (``allreduce_child.gpu_topology``), not here.

Note: ``nvidia-smi`` numbers GPUs in PCI bus order; torch uses CUDA ordinals, which follow
``CUDA_DEVICE_ORDER`` (fastest first by default).  On machines of identical GPUs they agree.
"""

from __future__ import annotations

import re
from typing import Any

from cuda_doctor.facts import Facts, indexed
from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.process import run_command

_DEVICE_COLUMN = re.compile(r"^(GPU|NIC)\d+$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def load_nvml() -> Any:
    """The real NVML binding (nvidia-ml-py); ImportError when it is not installed."""
    import pynvml

    return pynvml


def nvml_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def nvml_gpu_count(nvml: Any) -> int:
    """Number of GPUs NVML sees; raises on any NVML error (the caller records it)."""
    nvml.nvmlInit()
    try:
        return int(nvml.nvmlDeviceGetCount())
    finally:
        nvml.nvmlShutdown()


def nvlink_facts(nvml: Any) -> Facts:
    """``nvlink[i].active_links`` (0 where NVLink is not supported) and ``nvlink[i].supported``."""
    facts = Facts()
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVML missing or driver not loaded: a reason, not a crash
        facts.mark_unknown("nvlink", f"NVML: {nvml_error(exc)}")
        return facts
    try:
        count = int(nvml.nvmlDeviceGetCount())
        max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
        enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
        for i in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            active, supported = 0, True
            version: int | str | None = None
            for link in range(max_links):
                try:
                    state = nvml.nvmlDeviceGetNvLinkState(handle, link)
                except nvml.NVMLError as exc:
                    if link == 0 and _not_supported(nvml, exc):
                        supported = False  # a PCIe-only board: no NVLink at all
                    break  # links are numbered densely; the first missing one ends the list
                if state == enabled:
                    active += 1
                    if version is None:
                        version = _link_version(nvml, handle, link)
            facts.set(indexed("nvlink", i, "supported"), supported)
            facts.set(indexed("nvlink", i, "active_links"), active)
            # NVML's version numbering is not the marketing generation: kept raw
            if isinstance(version, str):
                facts.mark_unknown(indexed("nvlink", i, "version_raw"), version)
            else:
                facts.set(indexed("nvlink", i, "version_raw"), version)
    except Exception as exc:  # any other NVML failure is recorded for the whole family
        facts.mark_unknown("nvlink", f"NVML: {nvml_error(exc)}")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:
            facts.mark_unknown("nvlink.shutdown", f"NVML shutdown: {nvml_error(exc)}")
    return facts


def _not_supported(nvml: Any, exc: BaseException) -> bool:
    code = getattr(exc, "value", None)
    return bool(code == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3))


def _link_version(nvml: Any, handle: Any, link: int) -> int | str:
    """The raw NVML link version, or why it could not be read (an optional detail)."""
    try:
        return int(nvml.nvmlDeviceGetNvLinkVersion(handle, link))
    except Exception as exc:
        return nvml_error(exc)


def parse_topo_matrix(text: str) -> tuple[str, dict[str, str]]:
    """``nvidia-smi topo -m`` → (the matrix without its legend, {"0-1": "NV18", …})."""
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    matrix_lines: list[str] = []
    for ln in lines:
        if ln.strip().startswith("Legend"):
            break
        matrix_lines.append(ln)
    while matrix_lines and not matrix_lines[-1].strip():
        matrix_lines.pop()
    while matrix_lines and not matrix_lines[0].strip():
        matrix_lines.pop(0)
    raw = "\n".join(matrix_lines)
    if not matrix_lines:
        return raw, {}
    columns = [c for c in matrix_lines[0].split() if _DEVICE_COLUMN.match(c)]
    pairs: dict[str, str] = {}
    for ln in matrix_lines[1:]:
        cells = ln.split()
        if not cells or not cells[0].startswith("GPU") or not _DEVICE_COLUMN.match(cells[0]):
            continue
        row = int(cells[0][3:])
        for name, cell in zip(columns, cells[1 : 1 + len(columns)], strict=False):
            if not name.startswith("GPU"):
                continue
            col = int(name[3:])
            if col > row:
                pairs[f"{row}-{col}"] = cell
    return raw, pairs


def topo_facts(ctx: ProbeContext) -> Facts:
    """``nccl.topo_matrix`` (raw) and ``nccl.link_types`` from ``nvidia-smi topo -m``."""
    facts = Facts()
    result = run_command(["nvidia-smi", "topo", "-m"], timeout=ctx.timeout, env=ctx.env)
    if not result.ok:
        reason = result.error or "nvidia-smi topo -m failed"
        facts.mark_unknown("nccl.topo_matrix", reason)
        facts.mark_unknown("nccl.link_types", reason)
        return facts
    raw, pairs = parse_topo_matrix(result.stdout)
    facts.set("nccl.topo_matrix", raw)
    if pairs or "GPU1" not in raw:
        facts.set("nccl.link_types", pairs)
    else:
        facts.mark_unknown("nccl.link_types", "could not parse nvidia-smi topo -m")
    return facts

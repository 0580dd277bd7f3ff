"""Recorded GPU samples: frozen data that round-trips through JSON so a run can be re-judged."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from cuda_doctor.gpu.nvml import gpu_facts  # NVML's clock-event bits, named once

SCHEMA = "cuda-doctor/watch-series"
SCHEMA_VERSION = 1


def reason_names(mask: int | None) -> tuple[str, ...]:
    return tuple(gpu_facts.reason_names(mask)) if mask else ()


@dataclass(frozen=True)
class GpuInfo:
    """What does not change during a run, read once per GPU."""

    index: int  # NVML index
    uuid: str | None = None
    name: str | None = None
    memory_total_mib: float | None = None
    sm_clock_max_mhz: float | None = None
    power_limit_w: float | None = None


@dataclass(frozen=True)
class Sample:
    """One reading of one GPU; ``None`` where NVML did not answer for that field."""

    t: float  # seconds since the command started
    gpu: int  # NVML index
    sm_util: float | None = None  # % of time a kernel ran (whole device)
    mem_util: float | None = None  # % of time device memory was read or written
    mem_used_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    clock_event_reasons: int | None = None
    pcie_rx_mbps: float | None = None  # host → device, MB/s
    pcie_tx_mbps: float | None = None  # device → host, MB/s
    temperature_c: float | None = None
    # The command's own processes (the child and its descendants); None = NVML could not say.
    child_on_gpu: bool | None = None
    child_sm_util: float | None = None
    child_mem_used_mib: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Series:
    """Everything the sampler recorded during one run."""

    interval_s: float
    duration_s: float
    gpus: tuple[GpuInfo, ...] = ()
    samples: tuple[Sample, ...] = ()
    nvml_error: str | None = None  # why there are no (or too few) samples
    notes: tuple[str, ...] = ()
    per_process: bool = False  # NVML attributed GPU use to the command's processes
    sampler_cpu_s: float | None = None  # CPU time the sampling threads used
    command: tuple[str, ...] = ()
    exit_code: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The critical Xids NVML delivered while the command ran: {"gpu", "xid", "after_s"}.
    xid_events: tuple[dict[str, Any], ...] = ()

    def for_gpu(self, index: int) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.gpu == index)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Series:
        if data.get("schema", SCHEMA) != SCHEMA:
            raise ValueError(f"not a watch series: schema {data.get('schema')!r}")
        return cls(
            interval_s=float(data["interval_s"]),
            duration_s=float(data["duration_s"]),
            gpus=tuple(GpuInfo(**g) for g in data.get("gpus", [])),
            samples=tuple(Sample.from_dict(s) for s in data.get("samples", [])),
            nvml_error=data.get("nvml_error"),
            notes=tuple(data.get("notes", [])),
            per_process=bool(data.get("per_process", False)),
            sampler_cpu_s=data.get("sampler_cpu_s"),
            command=tuple(data.get("command", [])),
            exit_code=data.get("exit_code"),
            extra=dict(data.get("extra", {})),
            xid_events=tuple(e for e in data.get("xid_events", []) if isinstance(e, dict)),
        )

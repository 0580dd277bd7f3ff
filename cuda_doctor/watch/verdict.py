"""Pure analysis of a recorded series: warm-up vs steady state, idle share, throttling, verdict."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cuda_doctor.watch.samples import GpuInfo, Sample, Series, reason_names

IDLE_UTIL = 5.0  # % SM utilisation below which the GPU counts as idle
BUSY_UTIL = 60.0  # below this it is "under 60% busy"
GPU_BOUND_UTIL = 80.0  # steady mean at or above this: the GPU itself is the bottleneck
BURST_UTIL = 30.0  # a sample this busy counts as a burst when looking for gaps between bursts
TRANSFER_RX_MBPS = 1000.0  # host→device traffic that, with a mostly idle SM, points at copies
THROTTLE_SHARE = 0.2  # share of busy steady samples with a limiting reason to call it limited
WARMUP_CAP_S = 30.0
WARMUP_SHARE = 0.1
MEMORY_FULL_SHARE = 0.9
MEMORY_ROOMY_SHARE = 0.6
THERMAL_REASONS = frozenset({"sw_thermal", "hw_thermal", "hw_slowdown"})

INPUT_FIXES = (
    "DataLoader(num_workers=N): load and transform batches in N worker processes instead of "
    "the training loop (start near the CPU cores per GPU, e.g. 4–8).",
    "DataLoader(pin_memory=True) with tensor.to('cuda', non_blocking=True): page-locked copies "
    "that overlap with compute.",
    "DataLoader(persistent_workers=True): keep the workers alive between epochs instead of "
    "starting them again each epoch.",
    "DataLoader(prefetch_factor=4) (needs num_workers > 0): keep more batches queued ahead of the GPU.",
    "Move preprocessing (decoding, augmentation, tokenisation) off the main process: into the "
    "Dataset that the workers run, into an offline preprocessed cache, or onto the GPU.",
    "If the workers wait on storage: copy the data set to local NVMe or RAM, or use sharded formats read sequentially.",
)
TRANSFER_FIXES = (
    "DataLoader(pin_memory=True) and .to('cuda', non_blocking=True): pageable copies are much "
    "slower than pinned ones and cannot overlap with compute.",
    "Send compact data: upload uint8 images or token ids and convert/normalise on the GPU.",
    "Keep a data set that fits in GPU memory on the GPU instead of copying it every step.",
    "Avoid per-step .cpu(), .item() and .numpy() on GPU tensors; each one is a copy and a sync.",
)
GPU_FIXES = (
    "Mixed precision (AMP): torch.autocast('cuda', dtype=torch.bfloat16) on Ampere or newer "
    "(float16 with torch.amp.GradScaler on older GPUs) runs matmuls on tensor cores.",
    "A larger batch size, if memory allows (scale the learning rate with it).",
    "Then: torch.compile(model), fused optimizers (fused=True), channels_last for "
    "convolutions, TF32 (torch.backends.cuda.matmul.allow_tf32 = True).",
)
THERMAL_FIXES = (
    "Check cooling: fans, airflow, inlet temperature and dust; on a shared server, tell its "
    "administrators (nvidia-smi -q -d TEMPERATURE,PERFORMANCE shows the slowdown reasons).",
    "hw_slowdown can also mean the power supply cannot deliver the load; check the PSU and cabling.",
)
POWER_FIXES = (
    "Compare the enforced and default power limits: nvidia-smi -q -d POWER; if the limit was "
    "lowered, restore it with sudo nvidia-smi -pl <default watts>.",
    "hw_power_brake is asserted from outside the GPU (chassis or power supply); report it to "
    "the machine's administrators.",
)
IDLE_FIXES = (
    "Check that the model and its inputs are moved to the GPU (model.to('cuda'), batch.to('cuda')).",
    "Check CUDA_VISIBLE_DEVICES and run cuda-doctor check to confirm the framework sees the GPU.",
)
MEMORY_FULL_FIXES = (
    "Mixed precision (AMP) roughly halves activation memory.",
    "A smaller batch with gradient accumulation, or activation checkpointing, trades compute for memory.",
)


@dataclass(frozen=True)
class Diagnosis:
    """What a run's samples say about one GPU (or the run): a kind, in words, why, and what to try."""

    kind: str
    title: str
    evidence: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PhaseStats:
    start_s: float
    end_s: float
    samples: int
    mean_sm_util: float | None
    idle_share: float | None  # share of samples under IDLE_UTIL
    under_busy_share: float | None  # share of samples under BUSY_UTIL
    gaps: int  # idle stretches between bursts
    mean_mem_util: float | None
    mean_pcie_rx_mbps: float | None
    mean_pcie_tx_mbps: float | None


@dataclass(frozen=True)
class GpuAnalysis:
    index: int
    name: str | None
    used_by_command: bool | None  # None: NVML could not attribute processes
    utilisation: tuple[float | None, ...]  # SM util over time, for the sparkline
    warmup: PhaseStats | None
    steady: PhaseStats | None
    peak_mem_mib: float | None
    memory_total_mib: float | None
    peak_mem_share: float | None
    peak_command_mem_mib: float | None
    max_temperature_c: float | None
    max_power_w: float | None
    power_limit_w: float | None
    mean_busy_sm_clock_mhz: float | None
    sm_clock_max_mhz: float | None
    throttle_shares: dict[str, float]  # reason → share of busy steady samples
    verdict: Diagnosis
    findings: tuple[Diagnosis, ...] = ()


@dataclass(frozen=True)
class Analysis:
    verdict: Diagnosis
    gpus: tuple[GpuAnalysis, ...]
    notes: tuple[str, ...] = ()


def _mean(values: Sequence[float | None]) -> float | None:
    real = [v for v in values if v is not None]
    return round(sum(real) / len(real), 1) if real else None


def _max(values: Iterable[float | None]) -> float | None:
    return max((v for v in values if v is not None), default=None)


def _share(values: Sequence[float], below: float) -> float | None:
    return round(sum(1 for v in values if v < below) / len(values), 3) if values else None


def count_gaps(util: Sequence[float]) -> int:
    """Idle stretches that sit between two bursts."""
    gaps = 0
    seen_burst = False
    in_gap = False
    for value in util:
        if value >= BURST_UTIL:
            if in_gap and seen_burst:
                gaps += 1
            seen_burst, in_gap = True, False
        elif value < IDLE_UTIL:
            in_gap = True
    return gaps


def phase_stats(samples: Sequence[Sample], start: float, end: float) -> PhaseStats | None:
    if not samples:
        return None
    util = [s.sm_util for s in samples if s.sm_util is not None]
    return PhaseStats(
        start_s=round(start, 2),
        end_s=round(end, 2),
        samples=len(samples),
        mean_sm_util=_mean(util),
        idle_share=_share(util, IDLE_UTIL),
        under_busy_share=_share(util, BUSY_UTIL),
        gaps=count_gaps(util),
        mean_mem_util=_mean([s.mem_util for s in samples]),
        mean_pcie_rx_mbps=_mean([s.pcie_rx_mbps for s in samples]),
        mean_pcie_tx_mbps=_mean([s.pcie_tx_mbps for s in samples]),
    )


def warmup_end(samples: Sequence[Sample], duration: float, interval: float) -> float:
    """Warm-up ends when utilisation first stays high (in the first half), else after 10% of the run
    (at most 30 s) or at the command's first use of the GPU if later, never past half of the run."""
    window = min(WARMUP_SHARE * duration, WARMUP_CAP_S)
    need = max(2, math.ceil(2.0 / interval)) if interval > 0 else 2
    run_start = 0.0
    run_len = 0
    for s in samples:
        if s.sm_util is not None and s.sm_util >= BUSY_UTIL:
            run_start = s.t if run_len == 0 else run_start
            run_len += 1
        else:
            run_len = 0
        if run_len >= need:  # utilisation stays high from run_start
            if run_start <= 0.5 * duration:
                return run_start
            break
    first_use = next(
        (s.t for s in samples if s.child_on_gpu or (s.sm_util is not None and s.sm_util >= IDLE_UTIL)), None
    )
    return min(max(window, first_use or 0.0), 0.5 * duration)


def _throttle_shares(busy: Sequence[Sample]) -> dict[str, float]:
    counts = Counter(name for s in busy for name in reason_names(s.clock_event_reasons) if name != "gpu_idle")
    return {k: round(v / len(busy), 3) for k, v in sorted(counts.items())} if busy else {}


def pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.0f}%"


def _side_diagnoses(throttle: dict[str, float], peak_share: float | None) -> list[Diagnosis]:
    """What is worth saying besides the verdict: a GPU at its power limit, memory nearly full."""
    extra: list[Diagnosis] = []
    power_cap = throttle.get("sw_power_cap", 0.0)
    if power_cap >= THROTTLE_SHARE:
        title = f"at the power limit {pct(power_cap)} of the busy time (normal for a fully loaded GPU)"
        evidence = f"clock-event reason sw_power_cap in {pct(power_cap)} of busy samples"
        extra.append(Diagnosis("power_capped", title, (evidence,), POWER_FIXES[:1]))
    if peak_share is not None and peak_share >= MEMORY_FULL_SHARE:
        title = f"GPU memory nearly full (peak {pct(peak_share)} of capacity)"
        evidence = f"peak memory used {pct(peak_share)} of the GPU's capacity"
        extra.append(Diagnosis("memory_full", title, (evidence,), MEMORY_FULL_FIXES))
    return extra


def _judge(
    steady: PhaseStats,
    samples: Sequence[Sample],
    throttle: dict[str, float],
    peak_share: float | None,
    used: bool | None,
) -> Diagnosis:
    util = steady.mean_sm_util
    if util is None:
        return Diagnosis("no_data", "no utilisation readings for this GPU")
    base = [
        f"steady state {steady.start_s:.0f}–{steady.end_s:.0f} s: mean SM utilisation {util:.0f}%",
        f"idle (<{IDLE_UTIL:.0f}%) {pct(steady.idle_share)} of the time, "
        f"under {BUSY_UTIL:.0f}% busy {pct(steady.under_busy_share)}",
    ]
    thermal = sum(v for k, v in throttle.items() if k in THERMAL_REASONS)
    brake = throttle.get("hw_power_brake", 0.0)
    if used is False and util < IDLE_UTIL:
        return Diagnosis("unused", "the command did not use this GPU", tuple(base))
    if util < IDLE_UTIL and not any(s.child_on_gpu for s in samples):
        return Diagnosis("idle", "the GPU stayed idle: the work did not reach it", tuple(base), IDLE_FIXES)
    if thermal >= THROTTLE_SHARE:
        names = ", ".join(k for k in throttle if k in THERMAL_REASONS)
        ev = (*base, f"thermal slowdown ({names}) in {pct(thermal)} of busy samples")
        return Diagnosis("thermal_limited", "thermally limited: the GPU slows itself down to cool", ev, THERMAL_FIXES)
    if brake >= THROTTLE_SHARE:
        ev = (*base, f"hw_power_brake in {pct(brake)} of busy samples")
        return Diagnosis("power_limited", "power limited: an external power brake slows the GPU", ev, POWER_FIXES)
    rx = steady.mean_pcie_rx_mbps
    if util < BUSY_UTIL and rx is not None and rx >= TRANSFER_RX_MBPS:
        copying = [s for s in samples if (s.pcie_rx_mbps or 0) >= TRANSFER_RX_MBPS and (s.sm_util or 0) < BUSY_UTIL]
        share = len(copying) / len(samples)
        if share >= 0.3:
            ev = (
                *base,
                f"host→device PCIe traffic {rx / 1000:.1f} GB/s on average while the SMs are mostly idle",
                f"{pct(share)} of samples copy ≥{TRANSFER_RX_MBPS / 1000:.0f} GB/s with SM under {BUSY_UTIL:.0f}%",
            )
            title = "host-to-device-transfer-bound: the GPU waits for copies"
            return Diagnosis("transfer_bound", title, ev, TRANSFER_FIXES)
    if util < BUSY_UTIL:
        if steady.gaps:
            base.append(f"{steady.gaps} idle gaps between bursts of work")
        if rx is not None:
            base.append(f"host→device PCIe only {rx:.0f} MB/s: not what the GPU waits for")
        return Diagnosis("input_bound", "input-bound: the GPU waits for data", tuple(base), INPUT_FIXES)
    if util < GPU_BOUND_UTIL:
        ev = (*base, f"{steady.gaps} idle gaps between bursts" if steady.gaps else "short stalls between steps")
        title = "mostly busy, with stalls: the input pipeline leaves some GPU time unused"
        return Diagnosis("partly_input_bound", title, ev, INPUT_FIXES[:4])
    fixes = list(GPU_FIXES)
    if peak_share is not None:
        base.append(f"peak memory {pct(peak_share)} of capacity")
        if peak_share >= MEMORY_ROOMY_SHARE:
            peaked = f"memory peaked at {pct(peak_share)}"
            fixes[1] = f"A larger batch size will not fit easily ({peaked}); AMP frees memory for one."
    return Diagnosis("gpu_bound", "GPU-bound: the GPU is busy; make each step cheaper", tuple(base), tuple(fixes))


def analyse_gpu(series: Series, info: GpuInfo, warmup_s: float | None = None) -> GpuAnalysis:
    samples = series.for_gpu(info.index)
    duration = max(series.duration_s, samples[-1].t if samples else 0.0)
    end = warmup_end(samples, duration, series.interval_s) if warmup_s is None else min(warmup_s, duration)
    warm = [s for s in samples if s.t < end]
    steady_samples = [s for s in samples if s.t >= end]
    if len(steady_samples) < 3:  # too short to split: judge the whole run
        steady_samples, warm = list(samples), []
        end = 0.0
    warmup = phase_stats(warm, 0.0, end)
    steady = phase_stats(steady_samples, end, duration)
    peak = _max(s.mem_used_mib for s in samples)
    total = info.memory_total_mib
    peak_share = round(peak / total, 3) if peak is not None and total else None
    busy = [s for s in steady_samples if (s.sm_util or 0) >= IDLE_UTIL]
    throttle = _throttle_shares(busy)
    attributed = [s.child_on_gpu for s in samples if s.child_on_gpu is not None]
    used = any(attributed) if attributed else None
    if steady is None:
        verdict, extra = Diagnosis("no_data", "no samples for this GPU"), []
    else:
        verdict = _judge(steady, steady_samples, throttle, peak_share, used)
        extra = _side_diagnoses(throttle, peak_share)
    return GpuAnalysis(
        index=info.index,
        name=info.name,
        used_by_command=used,
        utilisation=tuple(s.sm_util for s in samples),
        warmup=warmup,
        steady=steady,
        peak_mem_mib=peak,
        memory_total_mib=total,
        peak_mem_share=peak_share,
        peak_command_mem_mib=_max(s.child_mem_used_mib for s in samples),
        max_temperature_c=_max(s.temperature_c for s in samples),
        max_power_w=_max(s.power_w for s in samples),
        power_limit_w=info.power_limit_w,
        mean_busy_sm_clock_mhz=_mean([s.sm_clock_mhz for s in busy]),
        sm_clock_max_mhz=info.sm_clock_max_mhz,
        throttle_shares=throttle,
        verdict=verdict,
        findings=tuple(extra),
    )


def analyse(series: Series, warmup_s: float | None = None) -> Analysis:
    notes = list(series.notes)
    notes += [
        f"GPU {e.get('gpu')} raised Xid {e.get('xid')} {e.get('after_s')} s into the run: see NVIDIA's Xid catalog"
        for e in series.xid_events
    ]
    if series.nvml_error and not series.samples:
        title = f"no GPU samples (the command still ran): {series.nvml_error}"
        return Analysis(Diagnosis("no_data", title), (), tuple(notes))
    if series.nvml_error:
        notes.append(series.nvml_error)
    gpus = tuple(analyse_gpu(series, info, warmup_s) for info in series.gpus)
    if not gpus:
        return Analysis(Diagnosis("no_data", "no GPU was sampled"), (), tuple(notes))
    if not series.samples:
        title = "no samples: the command ended before the first one was taken"
        return Analysis(Diagnosis("no_data", title), (), tuple(notes))
    in_scope = [g for g in gpus if g.used_by_command]
    if not in_scope:
        # No attribution: judge the GPUs that did something, else every visible one.
        active = [g for g in gpus if g.verdict.kind not in ("idle", "unused", "no_data")]
        in_scope = active or list(gpus)
        if series.per_process is False and any(g.used_by_command is False for g in gpus):
            notes.append(
                "NVML did not list the command's processes on any GPU (another PID namespace, "
                "or the command never used a GPU): judging every visible GPU"
            )
    judged = [g for g in in_scope if g.verdict.kind != "no_data"] or in_scope
    kinds = {g.verdict.kind for g in judged}
    if len(kinds) == 1 and len(judged) > 1:
        evidence = tuple(f"GPU {g.index}: {e}" for g in judged for e in g.verdict.evidence[:2])
        headline = replace(judged[0].verdict, evidence=evidence)
    else:
        # GPUs disagree: the least busy one holds the others back.
        slowest = min(
            judged, key=lambda g: g.steady.mean_sm_util if g.steady and g.steady.mean_sm_util is not None else 101
        )
        evidence = tuple(f"GPU {slowest.index}: {e}" for e in slowest.verdict.evidence)
        headline = replace(slowest.verdict, evidence=evidence)
        if len(judged) > 1:
            notes.append("the GPUs disagree: " + ", ".join(f"GPU {g.index} {g.verdict.kind}" for g in judged))
    return Analysis(headline, gpus, tuple(notes))

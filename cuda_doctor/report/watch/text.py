"""The watch report for a terminal: a sparkline per GPU, the phases, the verdict and its fixes."""

from __future__ import annotations

import io
import shlex
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from cuda_doctor.report import printable
from cuda_doctor.watch.samples import Series
from cuda_doctor.watch.verdict import Analysis, GpuAnalysis, PhaseStats, pct

BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60
VERDICT_STYLE = {
    "gpu_bound": "green", "input_bound": "yellow", "partly_input_bound": "yellow", "transfer_bound": "yellow",
    "thermal_limited": "red", "power_limited": "red",
}  # fmt: skip


def _shown(text: str) -> str:
    """Text from outside (a GPU's name) as markup: control characters and ``[`` escaped."""
    return escape(printable(text))


def sparkline(values: Sequence[float | None], width: int = SPARK_WIDTH) -> str:
    """0–100 values as unicode blocks, averaged into at most ``width`` characters."""
    if not values:
        return ""
    per = max(1, -(-len(values) // width))  # ceil: each character covers ``per`` samples
    chars = []
    for start in range(0, len(values), per):
        chunk = [v for v in values[start : start + per] if v is not None]
        if not chunk:
            chars.append(" ")
            continue
        level = sum(chunk) / len(chunk)
        chars.append(BLOCKS[min(len(BLOCKS) - 1, int(level / 100 * len(BLOCKS)))])
    return "".join(chars)


def _num(x: float | None, unit: str, digits: int = 0) -> str:
    return "?" if x is None else f"{x:,.{digits}f} {unit}"


def _phase(label: str, p: PhaseStats) -> str:
    util = "?" if p.mean_sm_util is None else f"{p.mean_sm_util:.0f}%"
    text = (
        f"{label} {p.start_s:.0f}–{p.end_s:.0f} s: SM {util} mean, idle {pct(p.idle_share)}, "
        f"under 60% busy {pct(p.under_busy_share)}"
    )
    if p.gaps:
        text += f", {p.gaps} gaps between bursts"
    if p.mean_pcie_rx_mbps is not None:
        text += f", PCIe rx {p.mean_pcie_rx_mbps:,.0f} MB/s tx {p.mean_pcie_tx_mbps or 0:,.0f} MB/s"
    return text


def gpu_lines(gpu: GpuAnalysis) -> list[str]:
    lines = []
    if gpu.warmup is not None and gpu.warmup.samples:
        lines.append(_phase("warm-up", gpu.warmup))
    if gpu.steady is not None:
        lines.append(_phase("steady", gpu.steady))
    mem = f"memory peak {_num(gpu.peak_mem_mib, 'MiB')} of {_num(gpu.memory_total_mib, 'MiB')}"
    mem += f" ({pct(gpu.peak_mem_share)})"
    if gpu.peak_command_mem_mib is not None:
        mem += f", the command's processes {_num(gpu.peak_command_mem_mib, 'MiB')}"
    lines.append(mem)
    lines.append(
        f"power max {_num(gpu.max_power_w, 'W')} of {_num(gpu.power_limit_w, 'W')}; "
        f"SM clock {_num(gpu.mean_busy_sm_clock_mhz, 'MHz')} when busy "
        f"(max {_num(gpu.sm_clock_max_mhz, 'MHz')}); "
        f"temperature max {_num(gpu.max_temperature_c, '°C')}"
    )
    if gpu.throttle_shares:
        seen = ", ".join(f"{k} {pct(v)}" for k, v in gpu.throttle_shares.items())
        lines.append(f"clock-event reasons while busy: {seen}")
    else:
        lines.append("throttling: none seen while busy")
    if gpu.used_by_command is False:
        lines.append("the command's processes were never seen on this GPU")
    return lines


def render(series: Series, analysis: Analysis, *, color: bool = False, width: int = 100, **_: Any) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=width, soft_wrap=True)
    console.print(
        f"[bold]cuda-doctor watch[/]: {_shown(shlex.join(series.command))} — {series.duration_s:.1f} s, "
        f"exit code {series.exit_code}, {len(series.samples)} samples every {series.interval_s:g} s"
    )
    for gpu in analysis.gpus:
        console.print(f"[bold]GPU {gpu.index}[/] {_shown(gpu.name or '')}  {sparkline(gpu.utilisation)}")
        for line in gpu_lines(gpu):
            console.print(f"  {_shown(line)}", highlight=False)
    v = analysis.verdict
    console.print(f"[bold {VERDICT_STYLE.get(v.kind, 'bold')}]Verdict: {_shown(v.title)}[/]")
    for e in v.evidence:
        console.print(f"  • {_shown(e)}", highlight=False)
    if v.fixes:
        console.print("[bold]Fixes:[/]")
        for n, fix in enumerate(v.fixes, 1):
            console.print(f"  {n}. {_shown(fix)}", highlight=False)
    for gpu in analysis.gpus:
        for finding in gpu.findings:
            console.print(f"[bold]Also, GPU {gpu.index}:[/] {_shown(finding.title)}", highlight=False)
    for note in analysis.notes:
        console.print(f"[dim]note: {_shown(note)}[/]", highlight=False)
    if series.sampler_cpu_s is not None:
        cost = f"sampler CPU time {series.sampler_cpu_s:.3f} s"
        if series.duration_s >= 5:  # a share of a very short run says more about start-up
            cost += f" ({series.sampler_cpu_s / series.duration_s * 100:.2f}% of one core)"
        console.print(f"[dim]{cost}[/]", highlight=False)
    return buffer.getvalue()

"""The watch report as Markdown, to paste into an issue."""

from __future__ import annotations

import shlex
from typing import Any

from cuda_doctor.report import printable
from cuda_doctor.report.watch.text import gpu_lines, sparkline
from cuda_doctor.watch.samples import Series
from cuda_doctor.watch.verdict import Analysis


def render(series: Series, analysis: Analysis, **_: Any) -> str:
    out = [f"## cuda-doctor watch: `{shlex.join(series.command)}`", ""]
    run = f"{series.duration_s:.1f} s, exit code {series.exit_code}"
    out += [f"{run}, {len(series.samples)} samples every {series.interval_s:g} s", ""]
    for gpu in analysis.gpus:
        out += [f"### GPU {gpu.index} {gpu.name or ''}".rstrip(), ""]
        out += [f"`{sparkline(gpu.utilisation)}` SM utilisation over time", ""]
        out += [*(f"- {line}" for line in gpu_lines(gpu)), ""]
    v = analysis.verdict
    out += [f"**Verdict: {v.title}**", "", *(f"- {e}" for e in v.evidence)]
    if v.fixes:
        out += ["", "Fixes:", "", *(f"1. {f}" for f in v.fixes)]
    extra = [f"GPU {g.index}: {f.title}" for g in analysis.gpus for f in g.findings]
    if extra:
        out += ["", "Also:", "", *(f"- {title}" for title in extra)]
    if analysis.notes:
        out += ["", "Notes:", "", *(f"- {n}" for n in analysis.notes)]
    # the command line and GPU names come from outside: their control characters are escaped
    return "".join(printable(line) + "\n" for line in out)

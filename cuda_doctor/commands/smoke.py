"""``cuda-doctor smoke``: only the GPU smoke run (and the GPU facts it is judged with)."""

from __future__ import annotations

from pathlib import Path

import click

from cuda_doctor.commands import options
from cuda_doctor.commands.check import emit
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.config import Config, load_config
from cuda_doctor.core.pipeline import collect, judge_facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.probe import PROBE as GPU_PROBE
from cuda_doctor.report.check import FORMATS
from cuda_doctor.report.progress import ProgressLine, progress_line
from cuda_doctor.smoke.probe import SmokeProbe

#: The smoke rules (CD25: JAX's step) and the driver check, which says why a smoke run could not start.
SMOKE_RULES = ("CD7", "CD25", "CD101")
NCCL_RULES = ("CD8",)


@click.command("smoke")
@options.format_option(FORMATS)
@options.smoke_timeout_option("Seconds the whole smoke run may take before its child process is killed.")
@options.python_option(
    "Run the smoke test with this interpreter's framework (it needs no cuda-doctor)." + options.PYTHON_DEFAULT
)
@options.timeout_option("Seconds the GPU probe's NVML / nvidia-smi calls may take.")
@options.file_option("--save", help="Also write the full JSON report to this file.")
@click.option(
    "--nccl",
    is_flag=True,
    help="Also run the NCCL all-reduce (one process per GPU; one rank on a single GPU) and the interconnect checks.",
)
@options.fail_on_option
@options.config_option
@click.option("-v", "--verbose", is_flag=True, help="Show passing checks with their evidence.")
def command(
    fmt: str,
    smoke_timeout: float,
    nccl: bool,
    python: str | None,
    timeout: float,
    save: Path | None,
    fail_on: str | None,
    config_path: Path | None,
    verbose: bool,
) -> None:
    """Prove that the GPU computes, and at the speed it should.

    Runs a PTX vector add through the driver, then (when torch is installed) copies,
    fp32/fp16/bf16 matmuls checked against float64, an AMP training step and a cuDNN
    convolution on every visible GPU, in a child process killed after --smoke-timeout; then
    (when jax is installed) a jitted bf16 matmul on every GPU JAX has, in a child of its own.
    """
    config = load_config(config_path, Path.cwd())
    chosen = options.inspected_python(python, timeout)
    ctx = ProbeContext(python=chosen.path, timeout=timeout, smoke_timeout=smoke_timeout, nccl=nccl)
    with progress_line(fmt == "text") as line:
        report = run_smoke_check(ctx, config, line)
    options.record_interpreter(report.facts, chosen)
    emit(report, fmt, verbose, fail_on or config.fail_on or "error", save)


def run_smoke_check(ctx: ProbeContext, config: Config, line: ProgressLine | None = None) -> Report:
    # The GPU is read idle first, so that the smoke child is not counted as "another process".
    facts = collect(ctx, [GPU_PROBE], line)
    stepping = ctx if line is None else ctx.but(step_progress=line.step)
    facts.merge(collect(stepping, [SmokeProbe()], line))
    # JAX's step in a child of its own, after torch's: never beside it (one measures the other)
    from cuda_doctor.jax.gpu_probe import JaxGpuProbe

    facts.merge(collect(stepping, [JaxGpuProbe()], line))
    rules: tuple[str, ...] = SMOKE_RULES
    if ctx.nccl:
        from cuda_doctor.nccl.probe import NcclProbe

        facts.merge(collect(ctx, [NcclProbe()], line))
        rules = (*SMOKE_RULES, *NCCL_RULES)
    results, problems = judge_facts(facts, config, select=rules)
    # Only the smoke rules: the others would all read "deselected".
    results = [r for r in results if r.rule_id.startswith(rules)]
    return Report(facts=facts, results=results, command="smoke", problems=problems)

"""``cuda-doctor check``: probe, judge, print the checklist."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda_doctor.base.errors import UserError
from cuda_doctor.commands import options
from cuda_doctor.commands.output import echo_or_write
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.config import load_config
from cuda_doctor.core.pipeline import rejudge, run_check
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.core.results import Severity
from cuda_doctor.report.check import FORMATS, render


def _non_empty(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    if any(not item.strip() for item in value):
        raise click.BadParameter("an image reference cannot be empty (e.g. nvidia/cuda:12.4.1-base-ubuntu22.04)")
    return value


@click.command("check")
@options.format_option(FORMATS)
@click.option(
    "--fast",
    is_flag=True,
    help="No framework import and no GPU work: NVML, nvidia-smi, environment and container only "
    "(for hooks and entrypoints).",
)
@click.option("--no-smoke", is_flag=True, help="Skip the GPU smoke run.")
@options.smoke_timeout_option("Seconds the smoke run may take before it is killed.")
@options.python_option("Judge the framework of this interpreter (it needs no cuda-doctor)." + options.PYTHON_DEFAULT)
@options.file_option("--facts", "facts_file", help="Judge a saved report or facts file instead of this machine.")
@click.option(
    "--image",
    "images",
    multiple=True,
    metavar="IMAGE",
    callback=_non_empty,
    help="Also judge this Docker image for this host (repeatable).",
)
@click.option(
    "--run-image",
    is_flag=True,
    help="Also run nvidia-smi inside each --image with --gpus all (the NVIDIA Container Toolkit's own test).",
)
@click.option(
    "--nccl",
    is_flag=True,
    help="Run the NCCL all-reduce also with one GPU visible: one rank, a real NCCL initialisation and "
    "collective (with two or more GPUs it runs anyway, one rank per GPU).",
)
@options.timeout_option(
    "Seconds each probe's external call (NVML, nvidia-smi, Docker) may take. The --python "
    "interpreter gets max(TIMEOUT, 5) s to start, then up to max(TIMEOUT, 60) s for `import torch`."
)
@options.file_option(
    "--save", help="Also write the full JSON report to this file (for `cuda-doctor diff` and `fleet`)."
)
@options.file_option(
    "--output",
    "-o",
    help="Write the report in --format to this file instead of stdout, whole or not at all (renamed into "
    "place: e.g. --format prometheus -o /var/lib/node_exporter/textfile/cuda_doctor.prom).",
)
@options.selection
@options.fail_on_option
@options.config_option
@click.option("-v", "--verbose", is_flag=True, help="Show passing and skipped checks with their evidence.")
def command(
    fmt: str,
    fast: bool,
    no_smoke: bool,
    smoke_timeout: float,
    python: str | None,
    facts_file: Path | None,
    images: tuple[str, ...],
    run_image: bool,
    nccl: bool,
    timeout: float,
    save: Path | None,
    output: Path | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: str | None,
    config_path: Path | None,
    verbose: bool,
) -> None:
    """Check this machine's driver, GPUs, framework build and container.

    Prints a checklist with the exact fix for every finding. Exit status: 0 when nothing
    reaches --fail-on, 1 when something does, 2 on a usage or internal error.
    """
    config = load_config(config_path, Path.cwd())
    fail_on = fail_on or config.fail_on or "error"
    if facts_file is not None:
        _only_judging(python=python, fast=fast, images=images, run_image=run_image, nccl=nccl)
        emit(rejudge(facts_file, config, select=select, ignore=ignore), fmt, verbose, fail_on, save, output)
        return
    options.refuse_fast_python(fast, python)
    if nccl and (fast or no_smoke):
        used = "--fast" if fast else "--no-smoke"
        raise UserError(f"--nccl runs work on the GPU: it cannot be combined with {used}")
    # --fast imports no framework: no interpreter is inspected, so none is looked for
    chosen = None if fast else options.inspected_python(python, timeout)
    ctx = ProbeContext(
        python=chosen.path if chosen else sys.executable,
        timeout=timeout,
        fast=fast,
        smoke=not (no_smoke or fast),
        smoke_timeout=smoke_timeout,
        images=images,
        run_images=run_image,
        nccl=nccl,
    )
    from cuda_doctor.report.progress import progress_line

    # held open through the output: a child still ending is waited for once the checklist is out
    with ctx.handoff.open():
        with progress_line(fmt == "text") as line:
            if line is not None:
                ctx = ctx.but(step_progress=line.step)  # the framework probe's and the smoke run's steps
            report = run_check(ctx, config, select=select, ignore=ignore, progress=line)
        options.record_interpreter(report.facts, chosen)
        emit(report, fmt, verbose, fail_on, save, output)


def _only_judging(**given: object) -> None:
    """--facts judges saved facts: options that steer probing would be silently ignored."""
    used = [f"--{name.replace('_', '-')}" for name, value in given.items() if value]
    if used:
        raise click.UsageError(f"{', '.join(used)} cannot be combined with --facts (nothing is probed)")


def emit(report: Report, fmt: str, verbose: bool, fail_on: str, save: Path | None, output: Path | None = None) -> None:
    severity = Severity(fail_on)
    # the save first, so that the summary's exit status is the one this run ends with; a failed
    # save loses nothing: the checklist is still printed, then the error
    if save is not None:
        from cuda_doctor.commands.output import try_write
        from cuda_doctor.report.check.json import render_json

        why = try_write(save, render_json(report, severity))
        if why is not None:
            report.save_error = f"cannot write {save}: {why}"
    code = report.exit_code(severity)  # 2 when there is no verdict or the save failed, in every format
    try:
        terminal = output is None and sys.stdout.isatty()
        echo_or_write(render(report, fmt, verbose=verbose, terminal=terminal, fail_on=fail_on), output)
    finally:
        if report.save_error is not None:
            click.echo(f"cuda-doctor: error: --save: {report.save_error}", err=True)
    sys.exit(code)

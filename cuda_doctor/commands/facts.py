"""``cuda-doctor facts``: the gathered facts alone, without judging."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda_doctor.commands.options import (
    PYTHON_DEFAULT,
    file_option,
    format_option,
    inspected_python,
    python_option,
    record_interpreter,
    refuse_fast_python,
    timeout_option,
)
from cuda_doctor.commands.output import echo_or_write
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.pipeline import derive_all, gather, import_derivers
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.report.facts import FORMATS, render
from cuda_doctor.report.progress import progress_line


@click.command("facts")
@format_option(FORMATS)
@click.option("--fast", is_flag=True, help="No framework import and no GPU work.")
@click.option("--no-smoke", is_flag=True, help="Skip the GPU smoke run.")
@python_option("Interpreter whose framework to inspect." + PYTHON_DEFAULT)
@timeout_option("Seconds each probe's external call may take.")
@click.option(
    "--derived/--no-derived", default=True, show_default=True, help="Include facts derived from the knowledge tables."
)
@file_option("--output", "-o", help="Write to this file instead of stdout.")
def command(
    fmt: str, fast: bool, no_smoke: bool, python: str | None, timeout: float, derived: bool, output: Path | None
) -> None:
    """Print the facts cuda-doctor gathers (driver, GPUs, framework, container…).

    The JSON form can be judged later, anywhere: `cuda-doctor check --facts FILE`.
    """
    refuse_fast_python(fast, python)
    chosen = None if fast else inspected_python(python, timeout)
    ctx = ProbeContext(
        python=chosen.path if chosen else sys.executable, timeout=timeout, fast=fast, smoke=not (fast or no_smoke)
    )
    with progress_line(fmt == "text" and output is None) as line:
        prepare = import_derivers if derived and not fast else None
        facts = gather(ctx if line is None else ctx.but(step_progress=line.step), progress=line, while_waiting=prepare)
    record_interpreter(facts, chosen)
    problems = derive_all(facts) if derived else []
    report = Report(facts=facts, results=[], command="facts", problems=problems)
    terminal = sys.stdout.isatty() and output is None
    # JSON is indented for a person (a terminal or a file), compact when piped, as `check` prints it
    echo_or_write(render(report, fmt, color=terminal, indent=terminal or output is not None), output)

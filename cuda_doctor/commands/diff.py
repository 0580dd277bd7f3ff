"""``cuda-doctor diff BEFORE AFTER``: what changed on one machine between two saved reports."""

from __future__ import annotations

import sys

import click

from cuda_doctor.commands.options import format_option, noise_option
from cuda_doctor.compare.diff import DEFAULT_NOISE, diff_reports
from cuda_doctor.core.reportfile import load_report
from cuda_doctor.report.compare import FORMATS, render_diff


@click.command("diff")
@click.argument("before", type=click.Path(dir_okay=False, path_type=str))
@click.argument("after", type=click.Path(dir_okay=False, path_type=str))
@format_option(FORMATS)
@noise_option(DEFAULT_NOISE, "Smoke figures within this band are 'the same': a fraction (0.05) or a percentage (5%).")
@click.option(
    "-v",
    "--all",
    "show_all",
    is_flag=True,
    help="List every GPU's line (text, markdown): by default a difference that 3 or more GPUs share is one line.",
)
def command(before: str, after: str, fmt: str, noise: float, show_all: bool) -> None:
    """Show what changed between two reports of one machine.

    BEFORE and AFTER are saved reports (cuda-doctor check --save FILE).  Shows the
    configuration that changed (driver, CUDA, framework build, cuDNN, NCCL, container),
    the environment variables that changed (CUDA_VISIBLE_DEVICES, NCCL_*, LD_LIBRARY_PATH…),
    rule outcomes that flipped (newly failing first) and smoke figures as after/before
    ratios.  A report without rule results (cuda-doctor facts) is compared on facts only;
    a smoke run made by one report only is one line, not a flip per rule.

    Exit status: 1 when something got worse (a rule newly failing, a key fact lost such
    as a framework no longer installed, a driver, CUDA, framework or CUDA build
    downgraded, GPUs hidden by CUDA_VISIBLE_DEVICES, a smoke check broken, a figure
    slower than the noise band), 0 otherwise, 2 when a report cannot be read.  GPUs that
    one report has and the other has not are named in one line; JSON lists every difference.
    """
    result = diff_reports(load_report(before), load_report(after), noise=noise)
    # width None: the terminal's (rich measures it), 80 columns into a pipe
    click.echo(render_diff(result, fmt, color=sys.stdout.isatty(), width=None, verbose=show_all), nl=False)
    sys.exit(1 if result.worse else 0)

"""``cuda-doctor fleet REPORT…|DIR``: many nodes' saved reports side by side."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda_doctor.base.errors import UserError
from cuda_doctor.commands.options import file_option, format_option, jobs_option, noise_option
from cuda_doctor.commands.output import echo_or_write
from cuda_doctor.compare.diff import DEFAULT_NOISE
from cuda_doctor.compare.fleet import FLEET_FIELDS, compare_fleet
from cuda_doctor.core.reportfile import load_unique
from cuda_doctor.report.compare import FLEET_FORMATS, render_fleet


@click.command("fleet")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@format_option(FLEET_FORMATS)
@noise_option(DEFAULT_NOISE, "Smaller deviations from a GPU model's median are never called outliers.")
@click.option(
    "--fail-on-difference",
    is_flag=True,
    help="Exit 1 when a report is unreadable, a node differs from the majority, "
    "has failing rules or is a performance outlier.  Without it the exit status is 0 "
    "even when nodes have failing rules.",
)
@click.option("--all-nodes", is_flag=True, help="Text output: list every node, however many.")
@file_option("--output", "-o", help="Write to this file instead of stdout (e.g. --format html -o fleet.html).")
@jobs_option("Processes reading the reports (0: one per CPU for large fleets, at most 8; 1: none).")
def command(
    paths: tuple[str, ...],
    fmt: str,
    noise: float,
    fail_on_difference: bool,
    all_nodes: bool,
    output: Path | None,
    jobs: int,
) -> None:
    """Compare saved reports of many nodes side by side.

    PATHS are report files or directories of *.json reports; a file given twice is read
    once.  Shows a table of nodes, the majority configuration (driver, CUDA, torch and its
    CUDA build, NCCL, GPU model and count), every node that differs from it, failing rules
    per node, and performance outliers among GPUs of the same model (median and MAD).
    Unreadable reports are named and the rest are still compared.

    Exit status: 0 by default, even when nodes have failing rules, differ or are
    outliers (the output is the finding); with --fail-on-difference, 1 when any report is
    unreadable, any node differs, has failing rules or is an outlier.  2 when no report
    could be read.
    """
    reports, errors, repeated = load_unique(paths, FLEET_FIELDS, jobs)
    if not reports:
        reasons = "; ".join(str(e) for e in errors) or "no reports given"
        raise UserError(f"no readable report: {reasons}")
    result = compare_fleet(reports, errors, noise=noise, repeated=repeated)
    terminal = sys.stdout.isatty() and output is None
    # width None: the terminal's (rich measures it), 80 columns into a pipe or a file
    echo_or_write(render_fleet(result, fmt, color=terminal, width=None, all_nodes=all_nodes), output)
    sys.exit(1 if fail_on_difference and not result.uniform else 0)

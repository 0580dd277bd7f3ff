"""``cuda-doctor lint PATH…``: static checks of training code, notebooks, Dockerfiles and pins."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from cuda_doctor.base.errors import UserError
from cuda_doctor.commands import options
from cuda_doctor.commands.output import try_write
from cuda_doctor.core.config import load_config
from cuda_doctor.core.results import Severity
from cuda_doctor.core.rules import load_rules
from cuda_doctor.core.selection import check_selection
from cuda_doctor.lint.engine import MAX_BYTES, LintOptions, lint_paths, lint_rules
from cuda_doctor.report.lint import FORMATS, render


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@options.format_option(FORMATS)
@options.lint_selection
@options.fail_on_option
@options.config_option
@options.file_option("--output", "-o", help="Write the report to this file instead of stdout.")
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Skip paths matching GLOB (fnmatch, against the path relative to the given "
    "directory and against each path component, e.g. 'build' or 'tests/*.py'). Repeatable.",
)
@options.jobs_option("Worker processes for large trees (0: one per CPU).")
@click.option(
    "--max-size",
    type=click.IntRange(1),
    default=MAX_BYTES // (1024 * 1024),
    show_default=True,
    help="Skip files larger than this many MiB (reported as CDL000).",
)
def command(
    paths: tuple[Path, ...],
    fmt: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: str | None,
    config_path: Path | None,
    output: Path | None,
    exclude: tuple[str, ...],
    jobs: int,
    max_size: int,
) -> None:
    """Check training code, notebooks, Dockerfiles, requirements and shell scripts.

    PATHS are files or directories (default: the current directory). Suppress a finding with
    a `# cuda-doctor: ignore[CDL001]` comment on its line. Exit status: 0 when nothing reaches
    --fail-on (default: error), 1 when something does, 2 on a usage or internal error.
    """
    missing = [p for p in paths if not os.path.lexists(p)]
    if missing:
        raise UserError(f"{missing[0]}: no such file or directory")
    config = load_config(config_path, Path.cwd())
    loaded = load_rules(config.rules_dirs)  # environment rules too: the configuration names both
    check_selection(loaded, "lint", config, select, ignore)
    settings = LintOptions(
        select=select or config.select,
        ignore=tuple(ignore) + tuple(config.ignore),
        exclude=exclude,
        severity=dict(config.severity),
        max_bytes=max_size * 1024 * 1024,
        jobs=jobs,
    )
    report = lint_paths(list(paths) or [Path(".")], settings, lint_rules(loaded))
    if output is None:
        _to_stdout(render(report, fmt, color=fmt == "text" and sys.stdout.isatty()))
    else:
        text = render(report, fmt)
        why = try_write(output, text)  # whole or not at all; through a symlink
        if why is not None:
            _to_stdout(text)  # the findings are not lost
            raise UserError(f"cannot write {output}: {why}; the report was written to stdout instead")
    threshold = Severity(fail_on or config.fail_on or "error").rank
    sys.exit(1 if any(f.severity.rank >= threshold for f in report.findings) else 0)


def _to_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()

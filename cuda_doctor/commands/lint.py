"""``cuda-doctor lint PATH…``: static checks of training code, notebooks, Dockerfiles and pins."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda_doctor.commands.options import config_option, fail_on_option, format_option, selection
from cuda_doctor.config import load_config
from cuda_doctor.lint.engine import MAX_BYTES, LintOptions, lint_paths
from cuda_doctor.lint.findings import SEVERITY_RANK
from cuda_doctor.lint.rules_meta import RuleFileError
from cuda_doctor.report.lint_output import FORMATS, write

EXIT_USAGE = 2


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@format_option(FORMATS)
@selection
@fail_on_option
@config_option
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the report to this file instead of stdout.")
@click.option("--jobs", "-j", type=click.IntRange(0, 256), default=0, show_default=True,
              help="Worker processes for large trees (0: one per CPU).")
@click.option("--max-size", type=click.IntRange(1), default=MAX_BYTES // (1024 * 1024),
              show_default=True, help="Skip files larger than this many MiB (reported as CDL000).")
def command(
    paths: tuple[Path, ...],
    fmt: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: str | None,
    config_path: Path | None,
    output: Path | None,
    jobs: int,
    max_size: int,
) -> None:
    """Check training code, notebooks, Dockerfiles, requirements and shell scripts.

    PATHS are files or directories (default: the current directory). Suppress a finding with
    a `# cuda-doctor: ignore[CDL001]` comment on its line. Exit status: 0 when nothing reaches
    --fail-on (default: error), 1 when something does, 2 on a usage or internal error.
    """
    missing = [p for p in paths if not p.exists() and not p.is_symlink()]
    if missing:
        click.echo(f"cuda-doctor lint: {missing[0]}: no such file or directory", err=True)
        sys.exit(EXIT_USAGE)
    config = load_config(config_path, Path.cwd())
    options = LintOptions(
        select=select or config.select,
        ignore=tuple(ignore) + tuple(config.ignore),
        severity=dict(config.severity),
        max_bytes=max_size * 1024 * 1024,
        jobs=jobs,
    )
    try:
        report = lint_paths(list(paths) or [Path(".")], options)
    except RuleFileError as exc:
        click.echo(f"cuda-doctor lint: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    write(report, fmt, output)
    threshold = SEVERITY_RANK[fail_on or config.fail_on or "error"]
    sys.exit(1 if any(f.rank >= threshold for f in report.findings) else 0)

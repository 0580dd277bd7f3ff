"""``cuda-doctor lint PATH…``: static checks of training code, notebooks, Dockerfiles and pins."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from cuda_doctor import rules as env_rules
from cuda_doctor.commands.options import config_option, fail_on_option, format_option, selection
from cuda_doctor.config import Config, load_config
from cuda_doctor.lint.engine import MAX_BYTES, LintOptions, lint_paths
from cuda_doctor.lint.findings import SEVERITY_RANK
from cuda_doctor.report.lint_output import FORMATS, write

EXIT_USAGE = 2


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@format_option(FORMATS)
@selection
@fail_on_option
@config_option
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the report to this file instead of stdout.",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Skip paths matching GLOB (fnmatch, against the path relative to the given "
    "directory and against each path component, e.g. 'build' or 'tests/*.py'). "
    "Repeatable.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(0, 256),
    default=0,
    show_default=True,
    help="Worker processes for large trees (0: one per CPU).",
)
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
        click.echo(f"cuda-doctor lint: {missing[0]}: no such file or directory", err=True)
        sys.exit(EXIT_USAGE)
    config = load_config(config_path, Path.cwd())
    _check_patterns(select, ignore, config)
    options = LintOptions(
        select=select or config.select,
        ignore=tuple(ignore) + tuple(config.ignore),
        exclude=exclude,
        severity=dict(config.severity),
        max_bytes=max_size * 1024 * 1024,
        jobs=jobs,
    )
    try:
        report = lint_paths(list(paths) or [Path(".")], options)
    except env_rules.RuleFileError as exc:
        click.echo(f"cuda-doctor lint: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    try:
        write(report, fmt, output)
    except OSError as exc:
        # The findings are not lost: they go to stdout, and the exit status says the run failed.
        write(report, fmt, None)
        click.echo(
            f"Error: cannot write {output}: {exc.strerror or exc}; the report was written to stdout instead", err=True
        )
        sys.exit(EXIT_USAGE)
    threshold = SEVERITY_RANK[fail_on or config.fail_on or "error"]
    sys.exit(1 if any(f.rank >= threshold for f in report.findings) else 0)


def _check_patterns(select: tuple[str, ...], ignore: tuple[str, ...], config: Config) -> None:
    """A --select/--ignore entry that matches no rule id, id prefix or category is a typo."""
    try:
        known = [(r.id, r.category) for r in env_rules.load_rules(config.rules_dirs)]  # lint rules too
    except env_rules.RuleFileError as exc:
        click.echo(f"cuda-doctor lint: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    categories = {category.upper() for _, category in known}
    for option, values in (
        ("--select", select),
        ("--ignore", ignore),
        (f"select in {config.source}", config.select),
        (f"ignore in {config.source}", config.ignore),
    ):
        for value in values:
            pattern = value.upper()
            if pattern in categories or any(rule_id.startswith(pattern) for rule_id, _ in known):
                continue
            click.echo(f"cuda-doctor lint: {option}: unknown rule id or category {value!r}", err=True)
            sys.exit(EXIT_USAGE)

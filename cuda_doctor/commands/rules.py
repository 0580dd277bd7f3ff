"""``cuda-doctor rules``: every rule cuda-doctor knows, one line each."""

from __future__ import annotations

from pathlib import Path

import click

from cuda_doctor.commands.options import config_option, format_option
from cuda_doctor.core.config import load_config
from cuda_doctor.core.rules import load_rules
from cuda_doctor.report.rules import FORMATS, render_rules


@click.command("rules")
@format_option(FORMATS)
@config_option
def command(fmt: str, config_path: Path | None) -> None:
    """List the rules: id, severity, category and title (your own rules included)."""
    config = load_config(config_path, Path.cwd())
    click.echo(render_rules(load_rules(config.rules_dirs), fmt, config.severity), nl=False)

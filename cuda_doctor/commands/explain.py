"""``cuda-doctor explain ID``: what a rule checks, why, and where the facts come from."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from cuda_doctor.commands.options import config_option
from cuda_doctor.core.config import load_config
from cuda_doctor.core.rules import load_rules
from cuda_doctor.report.rules import render_rule_markdown


@click.command("explain")
@click.argument("rule_id")
@config_option
@click.option("--no-color", is_flag=True, help="Print the Markdown source, also on a terminal (as NO_COLOR does).")
def command(rule_id: str, config_path: Path | None, no_color: bool) -> None:
    """Explain one rule: its condition, rationale, fix and sources.

    Rendered on a terminal; Markdown when piped or with --no-color.
    """
    config = load_config(config_path, Path.cwd())
    rules = {r.id: r for r in load_rules(config.rules_dirs)}
    rule = rules.get(rule_id.upper())
    if rule is None:
        close = [r for r in rules if r.startswith(rule_id.upper()[:3])][:8]
        hint = f" (did you mean {', '.join(close)}?)" if close else " (see `cuda-doctor rules`)"
        raise click.BadParameter(f"no rule {rule_id!r}{hint}", param_hint="RULE_ID")
    markdown = render_rule_markdown(rule)
    plain = no_color or "NO_COLOR" in os.environ or not sys.stdout.isatty()
    click.echo(markdown if plain else rendered(markdown, shutil.get_terminal_size().columns), nl=False)


def rendered(markdown: str, width: int) -> str:
    """``markdown`` as a terminal shows it: headings, emphasis and lists styled, links clickable."""
    import io

    from rich.console import Console
    from rich.markdown import Markdown

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=max(40, min(width, 120)), highlight=False)
    console.print(Markdown(markdown))
    return buffer.getvalue()

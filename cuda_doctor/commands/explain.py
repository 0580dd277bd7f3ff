"""``cuda-doctor explain ID``: what a rule checks, why, and where the facts come from."""

from __future__ import annotations

from pathlib import Path

import click

from cuda_doctor.commands.options import config_option
from cuda_doctor.core.config import load_config
from cuda_doctor.core.rules import load_rules
from cuda_doctor.report.rules import render_rule_markdown


@click.command("explain")
@click.argument("rule_id")
@config_option
def command(rule_id: str, config_path: Path | None) -> None:
    """Explain one rule: its condition, rationale, fix and sources."""
    config = load_config(config_path, Path.cwd())
    rules = {r.id: r for r in load_rules(config.rules_dirs)}
    rule = rules.get(rule_id.upper())
    if rule is None:
        close = [r for r in rules if r.startswith(rule_id.upper()[:3])][:8]
        hint = f" (did you mean {', '.join(close)}?)" if close else " (see `cuda-doctor rules`)"
        raise click.BadParameter(f"no rule {rule_id!r}{hint}", param_hint="RULE_ID")
    click.echo(render_rule_markdown(rule), nl=False)

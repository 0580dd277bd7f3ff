"""Options shared by the ``diff`` and ``fleet`` commands."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

FORMAT_OPTION = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="Output format.",
)


class NoiseBand(click.ParamType):
    """A relative band: ``0.05`` or ``5%``."""

    name = "FRACTION|PERCENT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            self.fail(f"{value!r} is not a fraction (0.05) or a percentage (5%)", param, ctx)
        if not 0 <= number < 1:
            self.fail(f"{value!r} must be at least 0 and below 100%", param, ctx)
        return number


NOISE = NoiseBand()


def fail_input(message: str) -> NoReturn:
    """One clear line on stderr, exit status 2 (unusable input)."""
    click.echo(f"cuda-doctor: error: {message}", err=True)
    sys.exit(2)

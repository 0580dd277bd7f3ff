"""The facts report (``cuda-doctor facts``): an aligned list, or JSON in the check report's
schema with no results, so that ``check --facts FILE`` can judge it later."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cuda_doctor.core.facts import Facts
from cuda_doctor.report import printable, value_text
from cuda_doctor.report.check.json import render_json

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report

FORMATS = ("text", "json")


def render_facts_text(facts: Facts, color: bool) -> str:
    """An aligned list, grouped by their first name part; unknown facts with their reason."""
    buffer = io.StringIO()
    # markup=False: a value or reason such as "[/dev/nvidiactl]" is text, not a style tag
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=120, highlight=False, markup=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("fact", style="cyan", no_wrap=True)
    table.add_column("value")
    for name in sorted(set(facts.values) | set(facts.unknown)):
        if name in facts.values:
            table.add_row(printable(name), printable(value_text(facts.values[name])))
        else:
            table.add_row(printable(name), Text(printable(f"unknown: {facts.unknown[name]}"), style="magenta"))
    console.print(table)
    return buffer.getvalue()


def render(report: Report, fmt: str, *, color: bool, indent: bool) -> str:
    """``color``: the text goes to a terminal; ``indent``: a person reads the JSON (a terminal or a file)."""
    if fmt == "text":
        return render_facts_text(report.facts, color)
    return render_json(report, indent=2 if indent else None)

"""Facts as an aligned list, grouped by their first name part."""

from __future__ import annotations

import io
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cuda_doctor.facts import Facts


def render_facts_text(facts: Facts, color: bool) -> str:
    buffer = io.StringIO()
    # markup=False: a value or reason such as "[/dev/nvidiactl]" is text, not a style tag
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=120, highlight=False, markup=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("fact", style="cyan", no_wrap=True)
    table.add_column("value")
    names = sorted(set(facts.values) | set(facts.unknown))
    for name in names:
        if name in facts.values:
            value = facts.values[name]
            shown = value if isinstance(value, str) else json.dumps(value, default=str)
            table.add_row(name, shown)
        else:
            table.add_row(name, Text(f"unknown: {facts.unknown[name]}", style="magenta"))
    console.print(table)
    return buffer.getvalue()

"""Reporters: the only code that turns reports into output.  Every format returns a string;
only the commands write it to stdout or a file.

One package or module per report type, each with its one format name → renderer table:
``check`` (check, smoke, exec), ``facts``, ``compare`` (diff and fleet), ``watch`` and ``rules``
(rules, explain, the generated reference).  ``progress`` is the transient line on a terminal
while probes run.  What the types share lives here.
"""

from __future__ import annotations


def md_cell(text: object) -> str:
    """Text that stays inside one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def count(n: int, one: str, many: str | None = None) -> str:
    """``count(1, "node")`` → "1 node", ``count(2, "node")`` → "2 nodes"."""
    return f"{n} {one if n == 1 else many or one + 's'}"

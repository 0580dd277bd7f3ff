"""One module per sub-command; each exposes a click command named ``command``.

COMMANDS is the one explicit list the CLI registers.
"""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []

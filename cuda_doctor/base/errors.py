"""The one base class for errors a user can fix: click shows ``cuda-doctor: error: <message>``
on stderr and exits 2, never a traceback."""

from __future__ import annotations

from typing import IO, Any

import click


class UserError(click.ClickException):
    """A problem with what the user gave us; the message is one sentence naming the thing."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"cuda-doctor: error: {self.format_message()}", file=file, err=file is None)

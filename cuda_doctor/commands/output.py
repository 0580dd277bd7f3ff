"""Writing a command's report to a file, whole (``atomic``: a temporary file in the same folder,
renamed into place), so nobody (a fleet collector, a CI step) ever reads half a report and a
failed write leaves the previous report as it was.  Missing folders are created; a symlink is
written through (its target is replaced); a path that is not a regular file (``/dev/stdout``,
a FIFO) is written to directly."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_doctor.base import atomic


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path``; raises ``ReportFileError`` naming the file and the reason."""
    why = try_write(path, text)
    if why is not None:
        from cuda_doctor.core.reportfile import ReportFileError

        raise ReportFileError(path, f"cannot write the report: {why}")


def echo_or_write(text: str, path: Path | None) -> None:
    """The report to ``path`` when one is given, else to stdout."""
    if path is None:
        import click

        click.echo(text, nl=False)
    else:
        write_file(path, text)


def try_write(path: Path, text: str) -> str | None:
    """``write_file`` that returns why it failed (None when written) instead of raising."""
    try:
        if path.exists() and not path.is_file():
            with path.open("w", encoding="utf-8") as fh:
                fh.write(text)
            return None
        real = Path(os.path.realpath(path))  # through a symlink, as open() would write
        real.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(real, text)
    except OSError as exc:
        blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        return f"{blocked} is not a directory" if blocked else (exc.strerror or str(exc))
    return None

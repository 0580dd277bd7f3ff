"""Writing a command's report to a file, whole (``atomic``: a temporary file in the same folder,
renamed into place), so nobody (a fleet collector, a CI step) ever reads half a report.  Missing
folders are created; a path that is not a regular file (``/dev/stdout``, a FIFO) is written through."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_doctor import atomic


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path``; raises ``ReportFileError`` naming the file and the reason."""
    try:
        if path.exists() and not path.is_file():
            with path.open("w", encoding="utf-8") as fh:
                fh.write(text)
            return
        real = Path(os.path.realpath(path))  # through a symlink, as open() would write
        real.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(real, text)
    except OSError as exc:
        from cuda_doctor.reportfile import ReportFileError

        blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        reason = f"{blocked} is not a directory" if blocked else (exc.strerror or str(exc))
        raise ReportFileError(path, f"cannot write the report: {reason}") from None

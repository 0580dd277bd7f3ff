"""The process entry point: the ``cuda-doctor`` script and ``python -m cuda_doctor``.

SIGINT and SIGTERM are handled here: every child process group cuda-doctor started is killed
and the process exits 130 or 143 with one line on stderr.  So is a standard output that is
closed (one line, exit 2) or stops being read (a quiet end by SIGPIPE, status 141): see
``base.streams``.  The click group and the one error boundary are in ``cli``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from cuda_doctor.base import streams
from cuda_doctor.base.process import stop_children_on_signals


def exit_status(run: Callable[[], object]) -> int:
    """Run ``run`` and return the status ``sys.exit`` would give the process."""
    try:
        run()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # what the interpreter does with a non-integer code
        return 1
    return 0


def main() -> None:
    streams.guard()  # a closed stdout: the first write says so, exit 2 (not silence, not exit 1)
    stop_children_on_signals()  # Ctrl-C or SIGTERM: every child group killed, one line, 130/143
    from cuda_doctor.cli import main as run

    status = exit_status(run)
    streams.flush()  # here, not in the interpreter's teardown, where a broken pipe is a warning
    sys.exit(status)

"""Standard output that is closed (``>&-``): the first write ends the command with one line on
stderr and exit status 2.  Or that nobody reads any more (``| head -1``): cuda-doctor ends quietly
by SIGPIPE (status 141), as other Unix tools do, never with click's exit 1 or with 0 (a pass)."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

CLOSED_MESSAGE = "cuda-doctor: error: standard output is closed, so the output cannot be written (redirect it: >FILE)"


class StdoutClosed(OSError):
    """A write to the stand-in for a standard output that was closed when cuda-doctor started."""

    def __init__(self) -> None:
        super().__init__(errno.EBADF, "standard output is closed")


class _ClosedRaw(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise StdoutClosed()


class _WholeWrites(io.BufferedWriter):
    """A BufferedWriter whose ``write`` writes everything or raises: Python's own may return a
    short count when the reader leaves, which click ignores."""

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            view = view[super().write(view) :]
        return total


def guard() -> None:
    """At the process entry: a failing stand-in for a closed standard output, whole writes to an open one."""
    stdout = sys.stdout
    if stdout is None:
        # write_through: nothing is ever buffered, so nothing fails again at exit
        sys.stdout = io.TextIOWrapper(_ClosedRaw(), encoding="utf-8", write_through=True)
        return
    if isinstance(stdout, io.TextIOWrapper) and _descriptor(stdout) == 1:
        # a FileIO of its own: the original one is closed when its wrapper is collected
        sys.stdout = io.TextIOWrapper(
            _WholeWrites(io.FileIO(1, "w", closefd=False)),
            encoding=stdout.encoding,
            errors=stdout.errors,
            line_buffering=stdout.line_buffering,
            write_through=stdout.write_through,
        )


def _descriptor(stream: io.TextIOWrapper) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError):  # not a file (an embedding's stream): left as it is
        return None


def stdout_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means that standard output is gone (closed, or a pipe nobody reads)."""
    return isinstance(exc, StdoutClosed) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE and _stdout_broken())


def _stdout_broken() -> bool:
    """A pipe (or socket) on fd 1 whose reader is gone: poll says POLLERR or POLLHUP."""
    import select

    try:
        poller = select.poll()
        poller.register(1, select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def end(exc: BaseException) -> None:
    """End the process for a lost standard output (``stdout_lost``); never returns."""
    from cuda_doctor.base.process import kill_all

    kill_all()
    if isinstance(exc, StdoutClosed):
        with contextlib.suppress(OSError):  # stderr is closed too: the exit status still says it
            os.write(2, (CLOSED_MESSAGE + "\n").encode())
        os._exit(2)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)  # only if the signal is blocked


@contextlib.contextmanager
def ended_when_lost() -> Iterator[None]:
    """Around everything a command writes: a lost standard output is dealt with before click sees it."""
    try:
        yield
    except OSError as exc:
        if stdout_lost(exc):
            end(exc)
        raise


def flush() -> None:
    """Flush standard output at the end of a command; a lost one ends the process here."""
    with ended_when_lost():
        if sys.stdout is not None:
            sys.stdout.flush()

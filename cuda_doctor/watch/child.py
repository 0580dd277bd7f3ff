"""Run the user's command as a child: its stdio untouched, signals forwarded, its exit code kept (not
through ``process.run_command``: its output must reach the terminal as is, with no time limit)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType

from cuda_doctor.base import process

EXIT_NOT_FOUND = 127  # as a POSIX shell reports it (also cuda-doctor exec's)
EXIT_CANNOT_EXECUTE = 126
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class SpawnError:
    exit_code: int
    message: str  # one line for stderr


def exit_code_of(returncode: int) -> int:
    """A death by signal N reads as 128+N, like a shell."""
    return 128 - returncode if returncode < 0 else returncode


def spawn(argv: Sequence[str]) -> subprocess.Popen[bytes] | SpawnError:
    """Start ``argv`` sharing our stdin/stdout/stderr and process group (so Ctrl-C reaches it)."""
    if not argv:
        return SpawnError(2, "cuda-doctor watch: no command given (usage: cuda-doctor watch -- CMD ARGS…)")
    name = argv[0]
    try:
        with process.starting():
            proc = subprocess.Popen(list(argv))
            process.track(proc, own_group=False)  # so an interrupt kills this process alone, never our group
    except FileNotFoundError:
        return SpawnError(EXIT_NOT_FOUND, f"cuda-doctor watch: {name}: command not found")
    except PermissionError:
        return SpawnError(EXIT_CANNOT_EXECUTE, f"cuda-doctor watch: {name}: permission denied")
    except OSError as exc:
        code = EXIT_NOT_FOUND if exc.errno == errno.ENOENT else EXIT_CANNOT_EXECUTE
        return SpawnError(code, f"cuda-doctor watch: {name}: {exc.strerror or exc}")
    return proc


def _terminal_delivers_to_group() -> bool:
    """Whether Ctrl-C already reaches the child: our shared group is the terminal's foreground one."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return True
        except OSError:
            continue
    return False


class SignalForwarder:
    """Forwards SIGINT, SIGTERM and SIGHUP to the child (held back until the child exists)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []

    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        for signum in self._pending:
            self._send(signum)
        self._pending.clear()

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and _terminal_delivers_to_group():
            return
        if self._proc is None:
            self._pending.append(signum)
        else:
            self._send(signum)

    def _send(self, signum: int) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it may have just exited
                self._proc.send_signal(signum)


@contextlib.contextmanager
def forwarding_signals() -> Iterator[SignalForwarder]:
    forwarder = SignalForwarder()
    previous = {signum: signal.signal(signum, forwarder.handle) for signum in FORWARDED}
    try:
        yield forwarder
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def wait(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the child (signal handlers run meanwhile) and return its shell-style exit code."""
    code = proc.wait()
    process.untrack(proc)
    return exit_code_of(code)

"""The process entry point: the ``cuda-doctor`` script and ``python -m cuda_doctor``.

Three things make ``check`` start and end quickly, which matters in hooks and entrypoints:

* A command that reads the GPU starts reading NVML before the command line itself is
  imported.  Opening NVML is mostly waiting on the driver (about 30 ms on an H200 for the first
  answers, ``early_open``); meanwhile this process imports click, the rules and the reporters.
* Once such a command has written its output, the process ends without interpreter teardown
  (freeing every module and object costs 10-15 ms and buys nothing here).
* Such a command also runs the cyclic garbage collector rarely (``GC_THRESHOLD``): with the
  default threshold a fast check makes 20-25 passes over the objects that importing creates
  (3.5-4.5 ms on an H200 machine), and they free almost nothing: modules live till the end.

SIGINT and SIGTERM are handled here, at the process entry: every child process group
cuda-doctor started is killed and the process exits 130 or 143 with one line on stderr.  So is
a standard output that is closed (one line, exit 2) or stops being read (a quiet end by SIGPIPE,
status 141): see ``streams``.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Mapping, Sequence

#: Commands whose GPU probe reads NVML for ``ProbeContext()``'s file system, in this process
#: till its end.  Not ``exec``: it becomes another program, which must not inherit the early
#: NVML reference (its probe's own read is closed before the exec).
READS_NVML_AHEAD = frozenset({"check", "facts", "smoke"})
#: Commands that leave no work to atexit handlers (files are written and closed, children
#: reaped, threads abandoned on purpose), so they may end without interpreter teardown.
ENDS_WITHOUT_TEARDOWN = frozenset({"check", "exec", "facts", "smoke"})
#: Allocations between two passes of the cyclic collector for those commands (Python's default is
#: 700): none during a fast check, and still a pass every few MB of cyclic garbage in a long one.
GC_THRESHOLD = 100_000


def command_words(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """The command name and cuda-doctor's own words (those after "--" are exec's CMD)."""
    words = list(argv)
    if "--" in words:
        words = words[: words.index("--")]
    command = next((word for word in words if not word.startswith("-")), None)
    return command, words


def wants_nvml(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether this command line will read NVML: a reading command, not asking for help or
    judging a saved file, with NVML not disabled."""
    command, words = command_words(argv)
    if command not in READS_NVML_AHEAD:
        return False
    from cuda_doctor.nvml import nvml_disabled

    if nvml_disabled(env):
        return False
    return not any(word in ("-h", "--help", "--version") or word.split("=")[0] == "--facts" for word in words)


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


def end_now(status: int) -> None:
    """Flush what was written and end the process without interpreter teardown."""
    from cuda_doctor import streams

    streams.flush()  # a standard output that is closed or broken ends the process here
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        status = status or 1  # a closed pipe: the messages did not all arrive
    os._exit(status)


def main() -> None:
    argv = sys.argv[1:]
    ends_without_teardown = command_words(argv)[0] in ENDS_WITHOUT_TEARDOWN
    if ends_without_teardown:
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    reads_nvml = wants_nvml(argv, os.environ)
    if reads_nvml:  # first of all: the driver's slow first answers come while everything imports
        from cuda_doctor.nvml.early_open import open_driver_early

        open_driver_early()
    from cuda_doctor import streams
    from cuda_doctor.process import stop_children_on_signals

    streams.guard()  # a closed stdout: the first write says so, exit 2 (not silence, not exit 1)
    stop_children_on_signals()  # Ctrl-C or SIGTERM: every child group killed, one line, 130/143
    if reads_nvml:
        from cuda_doctor.nvml.read import prefetch
        from cuda_doctor.probes.base import ProbeContext

        # --fast leaves what none of its rules reads unasked, the read ahead too
        prefetch(ProbeContext(fast="--fast" in command_words(argv)[1]))
    from cuda_doctor.cli import main as run

    if not ends_without_teardown:
        status = exit_status(run)
        streams.flush()  # here, not in the interpreter's teardown, where a broken pipe is a warning
        sys.exit(status)
    end_now(exit_status(run))

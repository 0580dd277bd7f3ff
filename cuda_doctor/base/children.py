"""Children of the target interpreter: started, read and stopped in one way.

Every program cuda-doctor runs *inside the interpreter it judges* (the framework probe's torch
child, the smoke children, the NCCL ranks) goes through this module:

* It is started as ``python -c SOURCE ARGS…``, never by a script's path: running a file puts
  the file's folder first on the child's ``sys.path``, where cuda-doctor's module names could
  shadow the user's packages.
* It runs in its own session, recorded by ``process`` so that an interrupt kills it, and its
  whole process group is killed at its deadline.
* It speaks one protocol on stdout (``parse_records``): each line that is a JSON object is a
  record; anything else (a library's chatter) is skipped.  Its first record, ``{"started":
  true}``, comes before any heavy import: a child that printed no record has not started and
  is given up on at its start timeout, not at its deadline.  ``{"step": label}`` announces a
  step: passed to ``on_step`` as it comes, the last one says where a killed child was.  Every
  other record is the child's own (framework facts, per-GPU figures, results, NCCL events).
* What it writes is kept within caps (``process.Pipe``): the first ``STDOUT_CAP`` bytes of
  stdout, the last ``STDERR_TAIL`` bytes of stderr; a result's ``cut`` says stdout had more.

``Child`` is one child, which a probe may leave running for a later one (``handoff``); ``run``
is one child from start to end; ``run_group`` is N children under one shared deadline (the
NCCL ranks): the first to fail, or the deadline, stops them all.

A child's source is one file, or that file composed with the child-side modules it names
(``compose``; the rules those modules keep are in ``cuda_doctor.base.childside``).

One module, not a package: what every subprocess needs (its own session, a pipe read within a
cap, the registry an interrupt empties) is ``cuda_doctor.base.process``, shared with the external
tools (nvidia-smi, nvcc); this module adds only what is particular to children running our code.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_doctor.base.process import CommandResult, Pipe, megabytes, start_streaming, wait_or_kill

if TYPE_CHECKING:
    import subprocess

STDOUT_CAP = 1 << 20
STDERR_TAIL = 64 << 10
#: Seconds an interpreter has at least to print its first record (``--timeout`` may be shorter).
START_FLOOR = 5.0
_QUOTE = 300  # characters of a child's own output quoted in a message


CHILDSIDE = Path(__file__).with_name("childside")
_HELPER_IMPORT = re.compile(r"^from cuda_doctor\.base\.childside\.(\w+) import")
_FUTURE = "from __future__ import annotations"


@functools.cache
def compose(script: Path) -> str:
    """The whole source of the child in ``script``: each child-side module it imports (and those
    they import) once, dependencies first, then the script, without those import lines.  Raises
    OSError when a file cannot be read."""
    parts: list[tuple[str, list[str]]] = []
    _gather(script, parts, set())
    lines = [_FUTURE]  # one, first: the only place a __future__ import may stand
    for name, body in parts:
        lines += [f"# ---- {name} ----", *body]
    return "\n".join(lines) + "\n"


def _gather(path: Path, parts: list[tuple[str, list[str]]], seen: set[Path]) -> None:
    if path in seen:
        return
    seen.add(path)
    body: list[str] = []
    open_import = False  # inside a parenthesised helper import that spans lines
    for line in path.read_text(encoding="utf-8").splitlines():
        if open_import:
            open_import = ")" not in line
            continue
        match = _HELPER_IMPORT.match(line)
        if match:
            _gather(CHILDSIDE / f"{match.group(1)}.py", parts, seen)
            open_import = line.rstrip().endswith("(")
            continue
        if line.strip() != _FUTURE:
            body.append(line)
    parts.append((path.name, body))


def start_timeout(timeout: float, limit: float, floor: float = START_FLOOR) -> float:
    """How long a child may take to start: ``--timeout``, at least ``floor``, at most ``limit``."""
    return min(max(timeout, floor), limit)


def parse_record(line: str | bytes) -> dict[str, Any] | None:
    """The record on one line of a child's stdout, or None for anything else."""
    import json

    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not text.startswith("{"):
        return None  # a library's own print, not ours
    try:
        value = json.loads(text)
    except ValueError:  # also a line cut off mid-write: a prefix of an object never parses
        return None
    return value if isinstance(value, dict) else None


def parse_records(text: str) -> list[dict[str, Any]]:
    return [record for line in text.splitlines() if (record := parse_record(line)) is not None]


def is_progress(record: Mapping[str, Any]) -> bool:
    """A record of the protocol itself ("started", "step"), not one of the child's answers."""
    return "started" in record or "step" in record


def excerpt(text: str, limit: int = _QUOTE) -> str:
    """A child's own output as quoted in a message: at most ``limit`` characters."""
    text = text.strip()
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def cut_note(result: CommandResult) -> str:
    return f" (its output passed {megabytes(STDOUT_CAP)}; the rest was not read)" if result.cut else ""


class Child:
    """One child of the target interpreter, read as it runs.  Never raises: one that cannot be
    started at all has its ``result`` at once (``returncode`` None, ``error`` the OS's reason).

    ``timeout`` bounds its whole run, ``start_timeout`` the wait for its first record.
    ``result`` is set once it has ended (``finish`` or ``stop``).
    """

    def __init__(
        self,
        python: str,
        source: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str],
        timeout: float,
        start_timeout: float | None = None,
        stdin: bool = False,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self.argv = (python, "-c", source, *args)
        self.on_step = on_step
        self.limit = timeout
        self.start_limit = timeout if start_timeout is None else min(start_timeout, timeout)
        self.result: CommandResult | None = None
        self._records: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._ended = False  # stdout closed
        self._began = time.monotonic()
        self._deadline = self._began + timeout
        self._proc: subprocess.Popen[bytes] | None = None
        proc = start_streaming(self.argv, env, stdin=stdin)
        if isinstance(proc, str):
            self.result = CommandResult(self.argv, None, "", "", 0.0, proc)
            self._ended = True
            return
        assert proc.stdout is not None and proc.stderr is not None
        self._proc = proc
        self._out = Pipe(proc.stdout, STDOUT_CAP, on_line=self._line, on_end=self._end)
        self._err = Pipe(proc.stderr, STDERR_TAIL, keep="tail")

    @property
    def started(self) -> bool:
        """It printed a record: the interpreter runs our code."""
        return bool(self._records)

    def poll(self) -> int | None:
        if self._proc is None:
            return None if self.result is None else self.result.returncode
        return self._proc.poll()

    def wait_for(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """The first record ``wanted`` accepts, once it has come; None when the child's output
        ends first, or its start timeout (no record yet) or its deadline passes."""
        seen = 0
        with self._changed:
            while True:
                for record in self._records[seen:]:
                    if wanted(record):
                        return record
                seen = len(self._records)
                left = self._until() - time.monotonic()
                if self._ended or left <= 0:
                    return None
                self._changed.wait(left)

    def seen(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """The first record so far that ``wanted`` accepts, without waiting for more."""
        with self._changed:
            return next((record for record in self._records if wanted(record)), None)

    def send(self, record: Mapping[str, Any]) -> bool:
        """Write one JSON line to the child's stdin (started with ``stdin=True``); False when it
        is gone."""
        import json

        stdin = None if self._proc is None or self.result is not None else self._proc.stdin
        if stdin is None:
            return False
        try:
            stdin.write((json.dumps(record) + "\n").encode("utf-8"))
            stdin.flush()
        except (OSError, ValueError):  # a broken pipe: it has exited
            return False
        return True

    def give_more_time(self, seconds: float) -> None:
        """A new deadline, ``seconds`` from now (a child left running, taken over for more work)."""
        self.limit = seconds
        self._deadline = time.monotonic() + seconds

    def finish(self) -> CommandResult:
        """Close its stdin, wait for it to end, and kill its group at its start timeout (no record
        yet) or its deadline."""
        if self.result is not None:
            return self.result
        assert self._proc is not None
        self._close_stdin()
        with self._changed:  # first: did it start?
            while not self._records and not self._ended and time.monotonic() < self._start_by():
                self._changed.wait(self._start_by() - time.monotonic())
        timed_out, survived = wait_or_kill(self._proc, self._until() - time.monotonic())
        self._out.join(timeout=2)
        self._err.join(timeout=2)
        stderr = self._err.text()
        if survived:
            stderr += "\nthe child did not exit after SIGKILL (stuck in the driver?)\n"
        self.result = CommandResult(
            self.argv,
            self._proc.returncode,
            self._out.text(),
            stderr,
            time.monotonic() - self._began,
            "timed out" if timed_out else None,
            timed_out=timed_out,
            cut=self._out.cut,
        )
        return self.result

    def stop(self, grace: float = 0.0) -> CommandResult:
        """End it now: its stdin closed, ``grace`` seconds to exit, then its group killed."""
        self._deadline = min(self._deadline, time.monotonic() + grace)
        return self.finish()

    def records(self) -> list[dict[str, Any]]:
        """Every record so far, in order."""
        with self._changed:
            return list(self._records)

    def _start_by(self) -> float:
        return min(self._began + self.start_limit, self._deadline)

    def _until(self) -> float:
        return self._deadline if self._records else self._start_by()

    def _close_stdin(self) -> None:
        stdin = None if self._proc is None else self._proc.stdin
        if stdin is not None:
            with contextlib.suppress(OSError):  # already closed by its exit: nothing to tell it
                stdin.close()

    def _line(self, line: bytes) -> None:
        record = parse_record(line)
        if record is None:
            return
        with self._changed:
            self._records.append(record)
            self._changed.notify_all()
        step = record.get("step")
        if self.on_step is not None and isinstance(step, str):
            self.on_step(step)

    def _end(self) -> None:
        with self._changed:
            self._ended = True
            self._changed.notify_all()


def run(
    python: str,
    source: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str],
    timeout: float,
    start_timeout: float | None = None,
    on_step: Callable[[str], None] | None = None,
) -> CommandResult:
    """One child from start to end (see ``Child``)."""
    child = Child(python, source, args, env=env, timeout=timeout, start_timeout=start_timeout, on_step=on_step)
    return child.finish()


@dataclass(frozen=True)
class GroupRun:
    results: tuple[CommandResult, ...]  # one per member, in order
    failed: int | None = None  # the first member that could not start or exited with a failure
    timed_out: bool = False


def run_group(
    python: str, source: str, members: Sequence[tuple[Sequence[str], Mapping[str, str]]], *, timeout: float
) -> GroupRun:
    """Run one child per (args, env) member at once, all within ``timeout`` seconds.  The first
    member that fails (or cannot start) stops every other: they would wait for it until their
    own timeout."""
    started = time.monotonic()
    group: list[Child] = []
    for args, env in members:
        group.append(Child(python, source, args, env=env, timeout=timeout))
        if group[-1].result is not None:
            return GroupRun(_stop_all(group), failed=len(group) - 1)
    while True:
        codes = [child.poll() for child in group]
        failed = next((i for i, code in enumerate(codes) if code not in (None, 0)), None)
        if failed is not None:
            return GroupRun(_stop_all(group), failed=failed)
        if all(code is not None for code in codes):
            return GroupRun(tuple(child.finish() for child in group))
        if time.monotonic() - started >= timeout:
            return GroupRun(_stop_all(group), timed_out=True)
        time.sleep(0.05)


def _stop_all(group: Sequence[Child]) -> tuple[CommandResult, ...]:
    for child in group:
        child.give_more_time(0.0)  # every deadline passed: stop() then kills without waiting
    return tuple(child.stop() for child in group)

"""Children of the target interpreter, each started as ``python -c SOURCE ARGS…`` in its own
session and killed with its group at its deadline.  Each stdout line that is a JSON object is a
record: ``{"started": true}`` first, before any heavy import, ``{"step": label}`` before each
step, then the child's own.  Kept within caps: the head of stdout, the tail of stderr."""

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
_FUTURE_LINE = re.compile(r"^from __future__ import [^\n]*$", re.M)


#: The first statements of every child: ``python -c`` puts the current directory first on ``sys.path``,
#: where a repository's ``json.py`` would run at the first import.  The rest stays as training sees it.
NO_CWD_IMPORTS = 'import sys\nif sys.path[:1] == [""]:\n    del sys.path[0]\n'


def without_cwd_imports(source: str) -> str:
    """``source`` that never imports from the current directory: the guard goes after its
    docstring and ``__future__`` imports, which must come first."""
    futures = list(_FUTURE_LINE.finditer(source))
    at = futures[-1].end() + 1 if futures else 0
    return source[:at] + NO_CWD_IMPORTS + source[at:]


@functools.cache
def compose(script: Path) -> str:
    """The whole source of the child in ``script``: the child-side modules it imports, once each
    and dependencies first, then the script without those imports.  OSError when unreadable."""
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

    text = (line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line).strip()
    if not text.startswith("{"):
        return None  # a library's own print, not ours
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # a line cut off mid-write, or nested past the parser's depth
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


def last_line(text: str) -> str:
    """``": LINE"``, the last line of a child's output that is not blank, quoted; "" when there is none."""
    lines = text.strip().splitlines()
    return f": {excerpt(lines[-1])}" if lines else ""


def cut_note(result: CommandResult) -> str:
    return f" (its output passed {megabytes(STDOUT_CAP)}; the rest was not read)" if result.cut else ""


class Child:
    """One child of the target interpreter, read as it runs.  Never raises: one that cannot start
    has its ``result`` at once.  ``timeout`` bounds its run, ``start_timeout`` its first record."""

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
        self.argv = (python, "-c", without_cwd_imports(source), *args)
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
        """The first record ``wanted`` accepts, once it comes; None when the output or a deadline ends first."""
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
        """Write one JSON line to the child's stdin; False when it is gone."""
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
        """Close its stdin and wait for it to end; kill its group at its start timeout or deadline."""
        if self.result is not None:
            return self.result
        assert self._proc is not None
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):  # already closed by its exit: nothing to tell it
                self._proc.stdin.close()
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
    return Child(python, source, args, env=env, timeout=timeout, start_timeout=start_timeout, on_step=on_step).finish()


@dataclass(frozen=True)
class GroupRun:
    results: tuple[CommandResult, ...]  # one per member, in order
    failed: int | None = None  # the first member that could not start or exited with a failure
    timed_out: bool = False


def run_group(
    python: str, source: str, members: Sequence[tuple[Sequence[str], Mapping[str, str]]], *, timeout: float
) -> GroupRun:
    """One child per (args, env) member at once, within ``timeout`` s; the first failure stops them all."""
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

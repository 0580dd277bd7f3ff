"""Time-bounded subprocesses that never raise (``run_command``: every failure is an ``error`` in
words), and the registry of every child still running, so that an interrupt leaves none behind."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    import subprocess

#: Bytes of one output stream of a child that are kept; the rest is read and dropped.
OUTPUT_CAP = 8 << 20
_CHUNK = 1 << 16


class CommandResult(NamedTuple):
    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    error: str | None = None  # set when the command could not give an answer
    timed_out: bool = False
    cut: bool = False  # an output stream passed its cap: what is kept is only part of it

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


def which(program: str, path: str | None) -> str | None:
    import shutil

    return shutil.which(program, path=path)


# -- the registry of running children ------------------------------------------------------------
#: pid → (process, whether it leads its own group); plain dict operations only (signal handlers read it).
_RUNNING: dict[int, tuple[subprocess.Popen[bytes], bool]] = {}
#: Held from a child's fork until it is recorded, so that an interrupt never falls in between.
_STARTING = threading.Lock()
_STOP = threading.Lock()  # taken by whichever thread handles the interrupt first
_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def track(proc: subprocess.Popen[bytes], own_group: bool = True) -> None:
    """Record a child so that an interrupt kills it; call it within ``starting()`` with the ``Popen``."""
    _RUNNING[proc.pid] = (proc, own_group)


def starting() -> threading.Lock:
    """Hold this while starting a child and recording it (``start_streaming`` does)."""
    return _STARTING


def untrack(proc: subprocess.Popen[bytes]) -> None:
    _RUNNING.pop(proc.pid, None)


def running_pids() -> list[int]:
    """The pids of the children cuda-doctor is running now."""
    return list(_RUNNING)


def kill_all(wait: float = 1.0) -> int:
    """SIGKILL every recorded child and reap them within ``wait`` s in all; returns how many."""
    import subprocess

    starting = _STARTING.acquire(timeout=wait)  # released while waiting: that thread goes on
    running = list(_RUNNING.values())
    if starting:
        _STARTING.release()
    for proc, own_group in running:
        kill = os.killpg if own_group else os.kill
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
            kill(proc.pid, signal.SIGKILL)
    end = time.monotonic() + wait
    for proc, _ in running:
        with contextlib.suppress(subprocess.TimeoutExpired):  # left to the kernel, as it must be
            proc.wait(timeout=max(end - time.monotonic(), 0.0))
        untrack(proc)
    return len(running)


def stop_children_on_signals() -> None:
    """On SIGINT, SIGTERM or SIGHUP: kill every recorded child, say so on stderr and exit 128 + the
    signal's number.  Call from the main thread; as that thread may not wake while it waits on a
    lock, a thread reading the wakeup pipe acts too (unless our handler was replaced: ``watch``)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for signum in _STOPPING:
        signal.signal(signum, _on_signal)
    threading.Thread(target=_read_wakeups, args=(read_end,), name="cuda-doctor-signals", daemon=True).start()


def _on_signal(signum: int, frame: object) -> None:
    for other in _STOPPING:
        signal.signal(other, signal.SIG_IGN)  # the cleanup below is not interrupted again
    _stop(signum)


def _read_wakeups(fd: int) -> None:
    while wakeup := os.read(fd, 1):
        if wakeup[0] in _STOPPING and signal.getsignal(wakeup[0]) is _on_signal:
            _stop(wakeup[0])


def _stop(signum: int) -> None:
    if not _STOP.acquire(blocking=False):  # the other thread is ending the process already
        while True:
            time.sleep(3600)
    killed = kill_all()
    children = f"; {killed} child process group(s) killed" if killed else ""
    name = signal.Signals(signum).name
    os.write(2, f"cuda-doctor: stopped by {name}{children}\n".encode())
    os._exit(128 + signum)  # 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP


# -- reading a child's output within a cap --------------------------------------------------------
class Pipe:
    """One output stream of a child, read to its end on a daemon thread, keeping at most ``cap``
    bytes, the first or the last ones (``keep``).  The rest is read and dropped (``cut``,
    ``on_cut``); ``on_line`` gets each line within the cap, ``on_end`` the end of the stream."""

    def __init__(
        self,
        stream: IO[bytes],
        cap: int = OUTPUT_CAP,
        *,
        keep: Literal["head", "tail"] = "head",
        on_line: Callable[[bytes], None] | None = None,
        on_cut: Callable[[], None] | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self.cap = cap
        self.cut = False
        self.error: str | None = None
        self._stream = stream
        self._keep = keep
        self._kept = bytearray()
        self._total = 0
        self._line_start = 0
        self._on_line, self._on_cut, self._on_end = on_line, on_cut, on_end
        self._thread = threading.Thread(target=self._read, name="cuda-doctor-pipe", daemon=True)
        self._thread.start()

    def text(self) -> str:
        kept = self._kept if self._keep == "head" else self._kept[-self.cap :]
        return kept.decode("utf-8", errors="replace")

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _read(self) -> None:
        fd = self._stream.fileno()
        try:
            while chunk := os.read(fd, _CHUNK):
                self._take(chunk)
        except OSError as exc:  # kept: the output above it still counts
            self.error = f"reading the child's output failed: {exc.strerror or exc}"
        if self._on_line is not None and self._line_start < len(self._kept) and not self.cut:
            self._on_line(bytes(self._kept[self._line_start :]))
        self._stream.close()
        if self._on_end is not None:
            self._on_end()

    def _take(self, chunk: bytes) -> None:
        self._total += len(chunk)
        if self._keep == "tail":
            self._kept += chunk
            if len(self._kept) > 2 * self.cap:  # trimmed now and then, not on every chunk
                del self._kept[: len(self._kept) - self.cap]
            if self._total > self.cap:
                self._set_cut()
            return
        room = self.cap - len(self._kept)
        if room > 0:
            self._kept += chunk[:room]
            self._lines()
        if len(chunk) > room:
            self._set_cut()

    def _lines(self) -> None:
        if self._on_line is None:
            return
        while (end := self._kept.find(b"\n", self._line_start)) >= 0:
            self._on_line(bytes(self._kept[self._line_start : end]))
            self._line_start = end + 1

    def _set_cut(self) -> None:
        if not self.cut:
            self.cut = True
            if self._on_cut is not None:
                self._on_cut()


def megabytes(size: int) -> str:
    return f"{size / 2**20:g} MiB"


# -- starting, waiting, killing ------------------------------------------------------------------
def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    cap: int = OUTPUT_CAP,
) -> CommandResult:
    """Run ``argv``; kill its group at ``timeout`` or once its output passes ``cap`` bytes."""
    args = tuple(argv)
    name = os.path.basename(args[0]) if args else "?"
    start = time.monotonic()
    search_path = None if env is None else env.get("PATH", os.defpath)
    exe = args[0] if os.sep in args[0] else which(args[0], search_path)
    if exe is None:
        return CommandResult(args, None, "", "", 0.0, f"{name} not found on PATH")
    proc = start_streaming([exe, *args[1:]], env, cwd=cwd)
    if isinstance(proc, str):
        return CommandResult(args, None, "", "", time.monotonic() - start, f"{name}: {proc}")
    assert proc.stdout is not None and proc.stderr is not None
    pipes = [Pipe(stream, cap, on_cut=lambda: kill_group(proc)) for stream in (proc.stdout, proc.stderr)]
    timed_out, survived = wait_or_kill(proc, timeout)
    for pipe in pipes:
        pipe.join(timeout=2)
    out, err = (pipe.text() for pipe in pipes)
    cut = any(pipe.cut for pipe in pipes)
    seconds = time.monotonic() - start
    if cut:
        error = f"{name} produced more than {megabytes(cap)} of output and was stopped"
    elif timed_out:
        error = f"{name} did not answer in {timeout:g} s" + (" (and survived SIGKILL)" if survived else "")
    elif proc.returncode != 0:
        detail = (err.strip() or out.strip()).splitlines()
        last = detail[-1][:500] if detail else ""
        error = f"{name} exited with status {proc.returncode}" + (f": {last}" if last else "")
    else:
        error = None
    code = None if timed_out or cut else proc.returncode
    return CommandResult(args, code, out, err, seconds, error, timed_out=timed_out, cut=cut)


def start_streaming(
    argv: Sequence[str], env: Mapping[str, str] | None, *, stdin: bool = False, cwd: str | None = None
) -> subprocess.Popen[bytes] | str:
    """Start a child in its own session, recorded for ``kill_all``; the process, or the OS error as text."""
    import subprocess

    with _STARTING:
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            return str(exc.strerror or exc)
        track(proc)
    return proc


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group (it was started in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bool, bool]:
    """Wait up to ``timeout`` s, then kill the group; (timed out, survived the kill: stuck in the
    kernel).  A reaped child leaves the registry."""
    import subprocess

    try:
        proc.wait(timeout=max(timeout, 0.0))
        untrack(proc)
        return False, False
    except subprocess.TimeoutExpired:
        kill_group(proc)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return True, True
    untrack(proc)
    return True, False

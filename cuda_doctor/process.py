"""Time-bounded subprocesses that never raise.

Every external program cuda-doctor runs goes through ``run_command``: a missing binary, a
non-zero exit, a hang (killed with its whole process group at the timeout) or an OS error
all come back as a ``CommandResult`` with a human-readable ``error``.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    error: str | None = None  # set when the command could not give an answer
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


def which(program: str, path: str | None) -> str | None:
    return shutil.which(program, path=path)


def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    cwd: str | None = None,
) -> CommandResult:
    """Run ``argv``; on timeout kill its process group and say so."""
    args = tuple(argv)
    name = os.path.basename(args[0]) if args else "?"
    start = time.monotonic()
    search_path = None if env is None else env.get("PATH", os.defpath)
    exe = args[0] if os.sep in args[0] else which(args[0], search_path)
    if exe is None:
        return CommandResult(args, None, "", "", 0.0, f"{name} not found on PATH")
    import subprocess  # imported here: a fast check that never runs a program does not pay for it

    try:
        proc = subprocess.Popen(
            [exe, *args[1:]],
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            text=True,
            errors="replace",
            start_new_session=True,  # lets us kill the whole group on timeout
        )
    except OSError as exc:
        return CommandResult(args, None, "", "", time.monotonic() - start, f"{name}: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(input=input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = _drain(proc)
        return CommandResult(
            args,
            None,
            out,
            err,
            time.monotonic() - start,
            f"{name} did not answer in {timeout:g} s",
            timed_out=True,
        )
    seconds = time.monotonic() - start
    error = None
    if proc.returncode != 0:
        detail = (err.strip() or out.strip()).splitlines()
        last = detail[-1] if detail else ""
        error = f"{name} exited with status {proc.returncode}" + (f": {last}" if last else "")
    return CommandResult(args, proc.returncode, out, err, seconds, error)


def start_streaming(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str] | str:
    """Start a child whose output the caller streams: its own session (so that a kill takes the
    whole group), text pipes, no stdin.  Returns the process, or the OS error as text."""
    import subprocess

    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return str(exc.strerror or exc)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the child's whole process group (it was started in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def wait_or_kill(proc: subprocess.Popen[str], timeout: float) -> tuple[bool, bool]:
    """Wait up to ``timeout`` s; past it, kill the group.  Returns (timed out, survived the kill):
    a process stuck in the kernel (state D, a wedged driver) can outlive SIGKILL for a while."""
    import subprocess

    try:
        proc.wait(timeout=max(timeout, 0.0))
        return False, False
    except subprocess.TimeoutExpired:
        kill_group(proc)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return True, True
    return True, False


def _drain(proc: subprocess.Popen[str]) -> tuple[str, str]:
    import subprocess

    try:
        out, err = proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:
        return "", ""
    return out or "", err or ""

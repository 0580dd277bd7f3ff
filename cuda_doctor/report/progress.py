"""The transient progress line on stderr while a command probes (terminals only): which probes
are running, and the step each child is at ("framework: import torch")."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

from cuda_doctor.report import printable


class ProgressLine:
    """Called as the pipeline's ``Progress`` with ("start" | "done", probe name); ``step`` is a
    ``ProbeContext.step_progress``: (what, step) whenever a child starts a step."""

    def __init__(self, status: Any) -> None:
        self._status = status
        self._lock = threading.Lock()  # probes report from their own threads
        self._running: list[str] = []
        self._steps: dict[str, str] = {}

    def __call__(self, event: str, name: str) -> None:
        with self._lock:
            if event == "start":
                self._running.append(name)
            elif name in self._running:
                self._running.remove(name)
                self._steps = {what: step for what, step in self._steps.items() if not what.startswith(name)}
            self._show()

    def step(self, what: str, step: str) -> None:
        with self._lock:
            self._steps[what] = step
            self._show()

    def _show(self) -> None:
        from rich.markup import escape

        # a probe with a step shows the step instead of its bare name
        busy = [name for name in self._running if not any(what.startswith(name) for what in self._steps)]
        busy += [f"{what}: {step}" for what, step in self._steps.items()]
        # the step names come from a child of the target interpreter: text, never markup or escapes
        self._status.update(escape(printable(f"Checking: {', '.join(busy) or 'judging'}…")))


@contextlib.contextmanager
def progress_line(enabled: bool) -> Iterator[ProgressLine | None]:
    """A ``ProgressLine`` for a person at a terminal (stdout and stderr both), else None."""
    if not enabled or not (sys.stderr.isatty() and sys.stdout.isatty()):
        yield None
        return
    from rich.console import Console  # only a terminal pays for it

    with Console(stderr=True).status("Checking…") as status:
        yield ProgressLine(status)

"""A transient progress line on stderr while probes run (terminals only, never in JSON)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from cuda_doctor.pipeline import Progress


@contextlib.contextmanager
def probe_progress(enabled: bool) -> Iterator[Progress | None]:
    # only for a person at a terminal: never in pipes, CI logs or hooks
    if not enabled or not (sys.stderr.isatty() and sys.stdout.isatty()):
        yield None
        return
    from rich.console import Console  # only a terminal pays for it

    console = Console(stderr=True)
    running: list[str] = []
    with console.status("Checking…") as status:

        def update(event: str, name: str) -> None:
            if event == "step":  # a long probe says what it is doing now
                status.update(f"Checking: {name}…")
                return
            if event == "start":
                running.append(name)
            elif name in running:
                running.remove(name)
            label = ", ".join(running) if running else "judging"
            status.update(f"Checking: {label}…")

        yield update

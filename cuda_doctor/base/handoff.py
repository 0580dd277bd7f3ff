"""Children one probe leaves running for a probe of a later phase, and children ending on their
own while the run goes on; the run's end stops or waits for every one of them.

Its own module, apart from ``children``: every probe's context holds one (``ProbeContext``), so
the fast check, which starts no child, imports this and not the child machinery.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_doctor.base.children import Child


class Handoff:
    """Children one probe leaves running for a probe of a later phase: the framework probe's
    torch child, which the smoke probe then asks to run the smoke steps, so that a check imports
    torch once.  A child is left only while a run holds this open (``open()``: the pipeline, and
    ``check`` until its checklist is printed); one still left when the last holder lets go is
    stopped, and one let end on its own (``let_end``) is waited for.  Outside a run nothing is
    left: a probe called on its own ends its children itself."""

    def __init__(self) -> None:
        self._holders = 0
        self._left: dict[str, Child] = {}
        self._ending: list[tuple[threading.Thread, Child, float]] = []  # and when to give up on it

    @contextlib.contextmanager
    def open(self) -> Iterator[None]:
        self._holders += 1
        try:
            yield
        finally:
            self._holders -= 1
            if not self._holders:
                self.close()

    @property
    def accepting(self) -> bool:
        return self._holders > 0

    def leave(self, name: str, child: Child) -> None:
        self._left[name] = child

    def take(self, name: str) -> Child | None:
        return self._left.pop(name, None)

    def let_end(self, child: Child, grace: float) -> None:
        """A child whose work is done ends on its own (its stdin closed, its group killed after
        ``grace`` seconds) while the run goes on: a GPU child takes a few tenths of a second to
        tear its context down, which the next phase-2 probe need not wait for.  The run's end
        waits for it; outside a run it is stopped now."""
        if child.result is not None or any(ending is child for _, ending, _ in self._ending):
            return
        if not self.accepting:
            child.stop(grace)
            return
        thread = threading.Thread(target=child.stop, args=(grace,), name="child-end", daemon=True)
        thread.start()
        # SIGKILL after the grace, then at most two seconds for each pipe to close
        self._ending.append((thread, child, time.monotonic() + grace + 10))

    def close(self) -> None:
        """Stop every child still left (told by its closed stdin, killed after a second), and wait
        for those ending on their own: none outlives the run."""
        for name in list(self._left):
            child = self._left.pop(name, None)
            if child is not None:
                child.stop(grace=1.0)
        while self._ending:
            thread, _, give_up = self._ending.pop()
            thread.join(max(give_up - time.monotonic(), 0.1))

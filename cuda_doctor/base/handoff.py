"""Children left running for a later probe, or ending on their own, until the run's end (apart
from ``children`` so that the fast check does not import the child machinery)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_doctor.base.children import Child


class Handoff:
    """Children one probe leaves running for a later one (the torch child, reused by the smoke
    probe), while a run holds this ``open()``; the last holder's exit stops or waits for them."""

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
        """A child whose work is done ends on its own, killed after ``grace`` s, while the run goes
        on; outside a run it is stopped now."""
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
        """Stop every child still left and wait for those ending on their own."""
        for name in list(self._left):
            child = self._left.pop(name, None)
            if child is not None:
                child.stop(grace=1.0)
        while self._ending:
            thread, _, give_up = self._ending.pop()
            thread.join(max(give_up - time.monotonic(), 0.1))

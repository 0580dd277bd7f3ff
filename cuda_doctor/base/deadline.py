"""Run blocking calls that cannot be interrupted (NVML, a Docker daemon) with a deadline, in
daemon threads that are abandoned if they overrun."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    value: T | None = None
    error: BaseException | None = None
    timed_out: bool = False


@dataclass
class _Slot:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


def _fill(slot: _Slot, func: Callable[[], Any]) -> None:
    try:
        slot.value = func()
    except BaseException as exc:  # handed back to the caller, which records it
        slot.error = exc


def call_with_deadline(func: Callable[[], T], deadline: float, name: str = "call") -> Outcome[T]:
    slot = _Slot()
    worker = threading.Thread(target=_fill, args=(slot, func), name=f"cuda-doctor-{name}", daemon=True)
    worker.start()
    worker.join(deadline)
    return Outcome(timed_out=True) if worker.is_alive() else Outcome(slot.value, slot.error)


class Overrun(Exception):
    """A call on a ``Worker`` did not return within its deadline."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"did not answer in {timeout:g} s")
        self.timeout = timeout


class Worker:
    """Runs calls one after another on one daemon thread, waiting for each at most its deadline;
    after the first overrun every call raises that Overrun.  ``cpu_s``: the calls' CPU time."""

    def __init__(self, name: str) -> None:
        self._tasks: queue.Queue[tuple[Callable[[], Any], _Slot] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self.cpu_s = 0.0
        self.hung: Overrun | None = None

    def call(self, func: Callable[[], T], timeout: float) -> T:
        if self.hung is not None:
            raise self.hung
        slot = _Slot()
        self._tasks.put((func, slot))
        if not slot.done.wait(timeout):
            self.hung = Overrun(timeout)
            raise self.hung
        if slot.error is not None:
            raise slot.error
        return slot.value

    def close(self, timeout: float = 1.0) -> None:
        self._tasks.put(None)
        if self.hung is None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            func, slot = task
            start = time.thread_time()
            _fill(slot, func)
            self.cpu_s += time.thread_time() - start
            slot.done.set()

"""Run a blocking call with a deadline, in a daemon thread that is abandoned if it overruns.

For calls that cannot be interrupted: a driver call through NVML, a Docker daemon that accepts
a connection and never answers (the SDK's socket timeout bounds each read, not the call).
A daemon thread never keeps the interpreter alive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    value: T | None = None
    error: BaseException | None = None
    timed_out: bool = False


def call_with_deadline(func: Callable[[], T], deadline: float, name: str = "call") -> Outcome[T]:
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = func()
        except BaseException as exc:  # handed back to the caller, which records it
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"cuda-doctor-{name}", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        return Outcome(timed_out=True)
    if "error" in box:
        error = box["error"]
        assert isinstance(error, BaseException)
        return Outcome(error=error)
    return Outcome(value=box.get("value"))  # type: ignore[arg-type]

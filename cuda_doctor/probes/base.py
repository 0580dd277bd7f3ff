"""What every probe shares: its inputs (``ProbeContext``) and its shape (``Probe``).

A probe gathers facts from one source.  It never prints and never raises: whatever it
cannot learn is recorded with ``Facts.mark_unknown`` and the reason.  Its inputs (the file
system root, the environment, PATH, the interpreter to inspect, timeouts) come from the
context, so tests can point a probe at fixtures instead of at this machine.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from cuda_doctor.facts import Facts
from cuda_doctor.handoff import Handoff

#: What a ProbeContext's repr leaves out: callables and live children, not inputs.
_NOT_SHOWN = frozenset({"step_progress", "handoff"})


class ProbeContext:
    """Everything a probe may look at.  Defaults describe the machine we run on.

    Read-only: ``but`` makes a changed copy.  A plain class, not a frozen dataclass: making
    that costs 1.4 ms, on every start of cuda-doctor (docs/architecture.md, start-up).
    """

    root: Path
    env: Mapping[str, str]
    python: str
    timeout: float
    fast: bool
    smoke: bool
    smoke_timeout: float
    images: tuple[str, ...]
    run_images: bool
    nccl: bool
    #: Why the probes --fast (or --no-smoke) leaves out did not run, when no option of the user's
    #: says it: ``exec`` runs the fast check at container start.  None: the options say it.
    skipped_because: str | None
    #: Called with (what, step) whenever a child starts a step: ("framework", "import torch"),
    #: ("smoke, driver level", "cuInit"); a terminal shows it (report/progress.py).
    step_progress: Callable[[str, str], None] | None
    #: Children one probe leaves running for a later phase (the framework probe's torch child).
    handoff: Handoff

    __slots__ = (
        "env",
        "fast",
        "handoff",
        "images",
        "nccl",
        "python",
        "root",
        "run_images",
        "skipped_because",
        "smoke",
        "smoke_timeout",
        "step_progress",
        "timeout",
    )

    def __init__(
        self,
        *,
        root: Path = Path("/"),
        env: Mapping[str, str] | None = None,  # None: a copy of this process's environment
        python: str = sys.executable,
        timeout: float = 10.0,
        fast: bool = False,
        smoke: bool = True,
        smoke_timeout: float = 30.0,
        images: tuple[str, ...] = (),
        run_images: bool = False,
        nccl: bool = False,
        skipped_because: str | None = None,
        step_progress: Callable[[str, str], None] | None = None,
        handoff: Handoff | None = None,
    ) -> None:
        fields = {"root": root, "env": dict(os.environ) if env is None else env, "python": python}
        fields |= {"timeout": timeout, "fast": fast, "smoke": smoke, "smoke_timeout": smoke_timeout}
        fields |= {"images": images, "run_images": run_images, "nccl": nccl, "skipped_because": skipped_because}
        fields |= {"step_progress": step_progress, "handoff": Handoff() if handoff is None else handoff}
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a ProbeContext is read-only: ctx.but({name}=...) makes a changed copy")

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__ if name not in _NOT_SHOWN)
        return f"ProbeContext({shown})"

    def __reduce__(self) -> tuple[Callable[[], ProbeContext], tuple[()]]:
        # copy and pickle make one through __init__: they would set its slots one by one
        return functools.partial(ProbeContext, **self._fields()), ()

    def _fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @property
    def path(self) -> str:
        return self.env.get("PATH", os.defpath)

    def file(self, absolute: str) -> Path:
        """Map an absolute path of the inspected system into ``root``."""
        return self.root / absolute.lstrip("/")

    def but(self, **changes: object) -> ProbeContext:
        return ProbeContext(**{**self._fields(), **changes})


class Probe(Protocol):
    """A source of facts.  ``name`` is also the prefix of the facts it records.

    A probe whose own time limits can add up to more than ``3 × ctx.timeout + 5`` s also
    defines ``deadline(ctx) -> float``: the pipeline abandons it only after that long.
    """

    name: str

    def applies(self, ctx: ProbeContext) -> bool:
        """False when the probe should not run at all (e.g. framework import under ``--fast``)."""
        ...

    def collect(self, ctx: ProbeContext) -> Facts: ...

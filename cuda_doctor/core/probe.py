"""What every probe shares: its inputs (``ProbeContext``) and its shape (``Probe``).

A probe gathers facts from one source.  It never prints and never raises: whatever it
cannot learn is recorded with ``Facts.mark_unknown`` and the reason.  Its inputs (the file
system root, the environment, PATH, the interpreter to inspect, timeouts) come from the
context, so tests can point a probe at fixtures instead of at this machine.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from cuda_doctor.base.handoff import Handoff
from cuda_doctor.core.facts import Facts


@dataclass(frozen=True, slots=True)
class ProbeContext:
    """Everything a probe may look at.  Defaults describe the machine we run on.

    Read-only: ``but`` makes a changed copy.
    """

    root: Path = Path("/")
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    python: str = sys.executable
    timeout: float = 10.0
    fast: bool = False
    smoke: bool = True
    smoke_timeout: float = 30.0
    images: tuple[str, ...] = ()
    run_images: bool = False
    nccl: bool = False
    #: Why the probes --fast (or --no-smoke) leaves out did not run, when no option of the user's
    #: says it: ``exec`` runs the fast check at container start.  None: the options say it.
    skipped_because: str | None = None
    #: Called with (what, step) whenever a child starts a step: ("framework", "import torch"),
    #: ("smoke, driver level", "cuInit"); a terminal shows it (report/progress.py).
    step_progress: Callable[[str, str], None] | None = field(default=None, repr=False, compare=False)
    #: Children one probe leaves running for a later phase (the framework probe's torch child).
    handoff: Handoff = field(default_factory=Handoff, repr=False, compare=False)

    @property
    def path(self) -> str:
        return self.env.get("PATH", os.defpath)

    def file(self, absolute: str) -> Path:
        """Map an absolute path of the inspected system into ``root``."""
        return self.root / absolute.lstrip("/")

    def but(self, **changes: Any) -> ProbeContext:
        return replace(self, **changes)


class Probe(Protocol):
    """A source of facts.  ``name`` is also the prefix of the facts it records.

    A probe whose own time limits can add up to more than ``3 × ctx.timeout + 5`` s also
    defines ``deadline(ctx) -> float``: the pipeline abandons it only after that long.
    """

    @property
    def name(self) -> str: ...

    def applies(self, ctx: ProbeContext) -> bool:
        """False when the probe should not run at all (e.g. framework import under ``--fast``)."""
        ...

    def collect(self, ctx: ProbeContext) -> Facts: ...

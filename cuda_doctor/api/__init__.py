"""The Python API: check this machine from inside a training script (docs/api.md).

``check()`` returns the report; ``require()`` returns quietly on a healthy machine and raises
``PreflightError`` with the checklist otherwise.  Under a launcher that starts one process per GPU,
only local rank 0 of each node checks; the others take its verdict (``ranks``).

Everything named in ``__all__`` follows semantic versioning: a release that removes or changes a
name, a parameter or a field of ``Report`` raises the major version (the minor one before 1.0).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cuda_doctor.api import ranks
from cuda_doctor.core.results import Result, Status

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report as _CoreReport
    from cuda_doctor.core.config import Config

__all__ = ["PreflightError", "Report", "Result", "Status", "check", "require"]

log = logging.getLogger("cuda_doctor")
#: The levels ``fail_on`` accepts, lowest last.
FAIL_ON = ("error", "warning", "info")
#: The seconds ``timeout`` and ``smoke_timeout`` may be, as the command's options allow.
TIMEOUT = (0.5, 600.0)
SMOKE_TIMEOUT = (1.0, 3600.0)
#: Seconds the other local ranks wait for local rank 0's verdict, by default.
WAIT_FAST = 120.0
WAIT_FULL = 900.0
WAIT_MOST = 86400.0

StrPath = str | os.PathLike[str]


class PreflightError(RuntimeError):
    """The machine is not fit to train on; ``str(error)`` is the checklist (plain text, no colour).

    ``headline`` is the one-line verdict (``FAIL CD401 …``); ``report`` is the full report in the
    process that checked, None in a process that took the verdict of its node's local rank 0.
    """

    def __init__(self, checklist: str, headline: str, report: Report | None = None) -> None:
        super().__init__(checklist)
        self.checklist = checklist
        self.headline = headline
        self.report = report


@dataclass(frozen=True)
class Report:
    """What one check found.

    ``results``: one per rule (and subject), worst first within each category; ``facts``: every
    known fact, name → value (``driver.version``); ``unknown``: the facts that could not be
    gathered, name → why; ``summary``: how many results have each status; ``exit_code``: what
    ``cuda-doctor check`` would exit with at ``fail_on`` (0 nothing reaches it, 1 something
    does, 2 no verdict: the driver or the list of GPUs could not be read).
    """

    results: tuple[Result, ...]
    facts: Mapping[str, Any]
    unknown: Mapping[str, str]
    summary: Mapping[str, int]
    exit_code: int
    fail_on: str
    host: str
    created: str
    seconds: float | None
    problems: tuple[str, ...]
    _report: _CoreReport = field(repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Nothing reached ``fail_on`` and there is a verdict."""
        return self.exit_code == 0

    @property
    def headline(self) -> str:
        """One printable ASCII line: ``OK …``, ``FAIL CD401 …`` or ``UNKNOWN …``."""
        from cuda_doctor.core.results import Severity
        from cuda_doctor.report.check.oneline import judge_oneline

        return judge_oneline(self._report, Severity(self.fail_on)).line

    def checklist(self, verbose: bool = False) -> str:
        """The checklist ``cuda-doctor check`` prints, as plain text; ``verbose`` adds passing checks."""
        from cuda_doctor.core.results import Severity
        from cuda_doctor.report.check.text import render

        return render(self._report, verbose=verbose, terminal=False, fail_on=Severity(self.fail_on))

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (docs/json-schema.md), as ``check --format json`` writes it."""
        from cuda_doctor.core.results import Severity

        return self._report.to_dict(Severity(self.fail_on))


def check(
    *,
    fast: bool = False,
    python: StrPath | None = None,
    select: str | Iterable[str] = (),
    ignore: str | Iterable[str] = (),
    smoke: bool = True,
    timeout: float = 10.0,
    smoke_timeout: float = 30.0,
    fail_on: str | None = None,
    config: StrPath | None = None,
) -> Report:
    """Check this machine as ``cuda-doctor check`` does and return the report; never prints.

    ``fast``: NVML, nvidia-smi, the environment and the container only (no framework import, no
    GPU work). ``python``: judge the framework of that interpreter instead of this one (not with
    ``fast``). ``select``/``ignore``: rule ids, id prefixes or categories. ``smoke``: False skips
    the GPU smoke run. ``fail_on``: "error", "warning" or "info" (default: ``fail-on`` from the
    configuration, else "error"). ``config``: a TOML file with ``[tool.cuda-doctor]`` settings
    (default: the nearest pyproject.toml from the current directory).

    Raises ``ValueError`` for options that cannot be used (a rule that does not exist, a broken
    configuration file, ``fast`` with ``python``).
    """
    from cuda_doctor.base.errors import UserError
    from cuda_doctor.core.pipeline import run_check
    from cuda_doctor.core.probe import ProbeContext

    if fast and python is not None:
        raise ValueError("python cannot be combined with fast: fast does not import the framework")
    for name, seconds, (low, high) in (("timeout", timeout, TIMEOUT), ("smoke_timeout", smoke_timeout, SMOKE_TIMEOUT)):
        if not low <= seconds <= high:  # NaN too
            raise ValueError(f"{name} must be from {low:g} to {high:g} seconds, not {seconds!r}")
    chosen, ignored = rule_list(select), rule_list(ignore)
    try:
        settings = _config(config)
        level = _fail_on(fail_on or settings.fail_on or "error")
        ctx = ProbeContext(
            python=os.fspath(python) if python is not None else sys.executable,
            timeout=timeout,
            fast=fast,
            smoke=smoke and not fast,
            smoke_timeout=smoke_timeout,
        )
        with ctx.handoff.open():
            report = run_check(ctx, settings, select=chosen, ignore=ignored)
    except UserError as exc:
        raise ValueError(exc.format_message()) from None
    return wrap(report, level)


def require(
    fail_on: str = "error",
    fast: bool = True,
    *,
    python: StrPath | None = None,
    select: str | Iterable[str] = (),
    ignore: str | Iterable[str] = (),
    timeout: float = 10.0,
    wait: float | None = None,
    config: StrPath | None = None,
) -> str:
    """Return the one-line verdict when nothing reaches ``fail_on``; raise ``PreflightError``
    with the checklist when something does.

    Under a launcher that starts one process per GPU (``LOCAL_RANK``, or ``SLURM_LOCALID``),
    local rank 0 checks and the node's other ranks wait up to ``wait`` seconds (default 120, or
    900 without ``fast``) for its verdict, then raise the same error or return the same line.
    A rank that gets no verdict in time runs the fast check itself (no GPU work) and logs why.
    A check with no verdict (the driver could not be read) does not raise: it logs a warning and
    returns the ``UNKNOWN …`` line.  Other parameters: as ``check``.
    """
    headline = preflight(
        local_rank=None,
        fail_on=fail_on,
        fast=fast,
        python=python,
        select=select,
        ignore=ignore,
        timeout=timeout,
        wait=wait,
        config=config,
    )
    if headline.startswith("OK"):
        log.info("cuda-doctor: %s", headline)
    else:  # no verdict: said, but no reason to stop
        log.warning("cuda-doctor: %s", headline)
    return headline


def preflight(
    *,
    local_rank: int | None,
    fail_on: str = "error",
    fast: bool = True,
    python: StrPath | None = None,
    select: str | Iterable[str] = (),
    ignore: str | Iterable[str] = (),
    timeout: float = 10.0,
    wait: float | None = None,
    config: StrPath | None = None,
) -> str:
    """``require`` with the local rank given (a trainer knows it), or None to read it from the
    environment; it logs nothing but why it checked without a verdict from local rank 0."""
    level = _fail_on(fail_on)
    if wait is not None and not 0 <= wait <= WAIT_MOST:  # NaN too
        raise ValueError(f"wait must be from 0 to {WAIT_MOST:g} seconds, not {wait!r}")
    env = os.environ
    rank = ranks.local_rank(env) if local_rank is None else local_rank
    where = ranks.folder()
    if rank != 0:
        patience = wait if wait is not None else WAIT_FAST if fast else WAIT_FULL
        if where is None:
            why = f"no private folder for local rank 0's verdict in {tempfile.gettempdir()}"
        else:
            my_start = ranks.started_at(os.getpid())
            verdict = ranks.await_verdict(where, env, os.getppid(), patience, my_start=my_start)
            if verdict is not None:
                return _settle(verdict, None)
            why = f"no verdict from local rank 0 in {patience:g} s"
        log.warning("cuda-doctor: %s: checking here (fast, no GPU work)", why)
        fast, python = True, None
    options: dict[str, Any] = {"python": python, "select": select, "ignore": ignore, "timeout": timeout}
    try:
        report = check(fast=fast, fail_on=level, config=config, **options)
    except Exception as exc:  # a usage error, or one of cuda-doctor's own: raised here as it is
        if rank == 0 and where is not None:  # and the others stop with the same words instead of waiting
            why = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            failed = ranks.Verdict(False, f"ERROR {why}", f"cuda-doctor could not check: {why}\n")
            ranks.publish(where, ranks.writer_keys(env, os.getpid(), os.getppid()), failed, os.getpid())
        raise
    verdict = ranks.Verdict(report.exit_code != 1, report.headline, report.checklist())
    if rank == 0 and where is not None:
        ranks.publish(where, ranks.writer_keys(env, os.getpid(), os.getppid()), verdict, os.getpid())
    return _settle(verdict, report)


def _settle(verdict: ranks.Verdict, report: Report | None) -> str:
    if not verdict.ok:
        raise PreflightError(verdict.checklist, verdict.headline, report)
    return verdict.headline


def wrap(report: _CoreReport, fail_on: str) -> Report:
    """The public view of a pipeline report."""
    from cuda_doctor.core.results import Severity

    return Report(
        results=tuple(report.results),
        facts=dict(report.facts.values),
        unknown=dict(report.facts.unknown),
        summary=report.counts(),
        exit_code=report.exit_code(Severity(fail_on)),
        fail_on=fail_on,
        host=report.host,
        created=report.created,
        seconds=report.seconds,
        problems=tuple(report.problems),
        _report=report,
    )


def rule_list(value: str | Iterable[str]) -> tuple[str, ...]:
    """``"CD1,CD2"`` or ``["CD1", "cd2"]`` → ``("CD1", "CD2")``, as ``--select`` reads them."""
    items = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(item, str) for item in items):
        raise ValueError(f"rule ids must be strings, not {value!r}")
    return tuple(part.strip().upper() for item in items for part in item.split(",") if part.strip())


def _fail_on(value: str) -> str:
    if value not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {', '.join(FAIL_ON)}, not {value!r}")
    return value


def _config(path: StrPath | None) -> Config:
    from pathlib import Path

    from cuda_doctor.core.config import load_config

    return load_config(Path(path) if path is not None else None, Path.cwd())

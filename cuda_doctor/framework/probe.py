"""What the deep-learning frameworks of the *target* interpreter see, from a child of ``ctx.python``
(``_child.py``), so that a framework that hangs or crashes cannot take the doctor with it.  The
fatbin scan runs meanwhile; when the smoke run follows, the child waits in ``ctx.handoff``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.base import children
from cuda_doctor.base.process import CommandResult, which
from cuda_doctor.core.facts import Facts, reported
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework import allocator
from cuda_doctor.framework._child import (
    ALLOCATOR_FACTS,
    LIBRARY_FACTS,
    PACKAGE_FACTS,
    TENSORFLOW_FACTS,
    TORCH_FACTS,
)
from cuda_doctor.framework.fatbin.collect import FATBIN_FACTS, budget, scan_facts
from cuda_doctor.framework.fatbin.collect import all_unknown as fatbin_unknown

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
#: The name the torch child is left under in ``ctx.handoff`` for the smoke probe.
TORCH_CHILD = "torch"
#: Every fact of the child's; each ends up known or unknown.
FRAMEWORK_FACTS: tuple[str, ...] = (
    "framework.python", "framework.python_version", *PACKAGE_FACTS, "torch.installed", *TORCH_FACTS,
    *ALLOCATOR_FACTS, *LIBRARY_FACTS, "tensorflow.installed", *TENSORFLOW_FACTS,
)  # fmt: skip
_PREFIXES = ("framework.", "torch.", "tensorflow.", "dist[", "companion[", "cudalib[")
#: Everything the probe answers for: its child's facts, and the fatbin scan's beside them.
ALL_FACTS = (*FRAMEWORK_FACTS, *FATBIN_FACTS, *allocator.FIX_FACTS)
#: A cold ``import torch`` takes seconds; the general probe timeout would call a healthy install hung.
DEFAULT_MIN_TIMEOUT = 60.0
#: An interpreter that prints no "started" record is given up on after max(--timeout, this).
DEFAULT_MIN_START_TIMEOUT = children.START_FLOOR


@dataclass
class FrameworkProbe:
    name: str = "framework"
    min_timeout: float = DEFAULT_MIN_TIMEOUT
    min_start_timeout: float = DEFAULT_MIN_START_TIMEOUT
    fatbin_cache: Path | None = None  # the fatbin scan's cache file; None: cuda-doctor's cache folder

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast  # --fast promises no framework import

    def timeout(self, ctx: ProbeContext) -> float:
        return max(ctx.timeout, self.min_timeout)

    def start_timeout(self, ctx: ProbeContext) -> float:
        return children.start_timeout(ctx.timeout, self.timeout(ctx), self.min_start_timeout)

    def deadline(self, ctx: ProbeContext) -> float:
        return self.timeout(ctx) + budget(ctx.timeout) + 30  # the child, the scan, then killing and reading it

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = self._collect(ctx)
        if facts.has("framework.python"):  # the interpreter ran: fixes may install into it
            facts.set("framework.pip", pip_command(ctx.python, ctx.path))
        allocator.add_fix(facts, allocator_keys())
        return facts

    def _collect(self, ctx: ProbeContext) -> Facts:
        try:
            source = children.compose(CHILD_SCRIPT)
        except OSError as exc:
            return all_unknown(f"cannot read the framework probe's source: {exc.strerror or exc}")
        timeout, start_timeout = self.timeout(ctx), self.start_timeout(ctx)
        keep = ctx.smoke and ctx.handoff.accepting  # the smoke run will want this torch
        config = json.dumps({"then": "wait" if keep else "exit", **child_config()})
        report = ctx.step_progress
        child = children.Child(
            ctx.python,
            source,
            [config],
            env=ctx.env,
            timeout=timeout,
            start_timeout=start_timeout,
            stdin=keep,
            on_step=None if report is None else lambda step: report("framework", step),  # "import torch"
        )
        if keep:
            ctx.handoff.leave(TORCH_CHILD, child)  # also when it fails: the smoke run reads why
        fatbin = self._scan(ctx, child)  # while the child imports torch
        payload = child.wait_for(is_payload) if keep else None
        if payload is not None:
            facts = shape(payload, ctx.python)
        else:
            facts = interpret(child.finish(), ctx.python, timeout, start_timeout)
        facts.merge(fatbin)
        return facts

    def _scan(self, ctx: ProbeContext, child: children.Child) -> Facts:
        """The fatbin scan of the folders on the child's sys.path (its first record)."""
        first = child.wait_for(lambda record: "paths" in record or is_payload(record))
        paths = first.get("paths") if first is not None else None
        if not isinstance(paths, dict):
            return fatbin_unknown(f"{ctx.python} did not report its sys.path to the framework probe")
        return scan_facts(paths, budget(ctx.timeout), self.fatbin_cache)


def is_payload(record: dict[str, Any]) -> bool:
    """The child's report: any record but the protocol's own and its ``{"paths": …}``."""
    return not children.is_progress(record) and "paths" not in record


def pip_command(python: str, path: str) -> str:
    """``pip`` when the first ``pip`` on ``path`` is ``python``'s own (by its ``#!``), else ``<python> -m pip``."""
    found = which(python, path) if os.sep not in python else python
    interpreter = os.path.abspath(found or python)
    pip = which("pip", path)
    if pip is not None and _runs(pip, interpreter):
        return "pip"
    return f"{shlex.quote(interpreter)} -m pip"


def _runs(script: str, interpreter: str) -> bool:
    """Whether the ``#!`` line of ``script`` names ``interpreter``: in its folder, and the same file."""
    try:
        with open(script, "rb") as handle:
            first = handle.read(512).split(b"\n", 1)[0]
    except OSError:
        return False
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if len(words) != 1 or not os.path.isabs(words[0]):  # "/usr/bin/env python3" names no file
        return False
    # one folder (a venv's python and python3 are one environment) and one file (not another Python's pip)
    same_folder = os.path.dirname(os.path.normpath(words[0])) == os.path.dirname(os.path.normpath(interpreter))
    return same_folder and os.path.realpath(words[0]) == os.path.realpath(interpreter)


def child_config() -> dict[str, Any]:
    """What the child lists: the CUDA distributions and torch's companions (``rules/data``)."""
    from cuda_doctor.framework.libraries.variants import selecting_variables
    from cuda_doctor.tables import load_table

    libraries = load_table("cuda_libraries")["child"]
    return {
        "distributions": list(libraries["distributions"]),
        "distribution_prefixes": list(libraries["distribution_prefixes"]),
        "companions": {row["name"]: row["package"] for row in load_table("companions")["companion"]},
        "library_variables": selecting_variables(),
    }


def allocator_keys() -> list[str]:
    """Every key of torch's allocator settings (``rules/data/torch_allocator.toml``)."""
    from cuda_doctor.tables import load_table

    return [str(key) for key in load_table("torch_allocator")["allocator"]["keys"]]


def interpret(result: CommandResult, python: str, timeout: float, start_timeout: float | None = None) -> Facts:
    """Turn the child's run into facts, or into one reason why there are none."""
    if result.timed_out:
        if start_timeout is not None and not children.parse_records(result.stdout):
            return all_unknown(
                f"{python} did not start the framework probe within {start_timeout:g} s"
                " (it printed nothing; is it a working Python?)"
            )
        return all_unknown(f"{python} did not answer in {timeout:g} s")
    if result.returncode is None:
        return all_unknown(f"could not run {python}: {result.error}")
    payload = find_payload(result.stdout)
    if payload is not None:
        return shape(payload, python)
    if result.returncode != 0:
        return all_unknown(f"{python} exited with {_status(result.returncode)}{_last_line(result)}")
    shown = _other_output(result.stdout)[:200]
    said = f": {shown!r}" if shown else " (empty output)"
    return all_unknown(f"{python} printed no JSON report{said}{children.cut_note(result)}")


def find_payload(stdout: str) -> dict[str, Any] | None:
    """The child's report: the last record that is not one of the protocol's own."""
    records = [record for record in children.parse_records(stdout) if is_payload(record)]
    return records[-1] if records else None


def shape(payload: dict[str, Any], python: str) -> Facts:
    """Keep the framework facts of the child's report; say why any expected one is missing."""
    facts = reported(payload, _PREFIXES, FRAMEWORK_FACTS, python)
    if facts is None:
        return all_unknown(f"{python} printed a report without 'values' and 'unknown' objects")
    failed = facts.get("torch.import_error")
    if failed:  # every torch fact the child left unknown is so for one reason: the traceback's last line
        for name in payload["unknown"]:
            if isinstance(name, str) and name.startswith("torch.") and name in facts.unknown:
                facts.unknown[name] = f"import torch failed: {failed}"
    return facts


def all_unknown(reason: str) -> Facts:
    facts = Facts()
    facts.mark_all_unknown(FRAMEWORK_FACTS, reason)
    return facts


def _status(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"


def _last_line(result: CommandResult) -> str:
    lines = (result.stderr.strip() or _other_output(result.stdout)).splitlines()
    return f": {children.excerpt(lines[-1])}" if lines else ""


def _other_output(stdout: str) -> str:
    """What the child printed besides the protocol's records (a wrapper's or a library's text)."""
    return "\n".join(line for line in stdout.splitlines() if children.parse_record(line) is None).strip()


PROBE = FrameworkProbe()

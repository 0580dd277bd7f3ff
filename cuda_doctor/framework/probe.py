"""What the deep-learning frameworks of the *target* interpreter see.

torch (and TensorFlow, when installed) are imported in a child of ``ctx.python``
(``cuda_doctor.base.children``): the interpreter being judged may not be ours, importing torch here
would make it a dependency, and a framework that hangs or crashes must not take the doctor with
it.  The child (``_child.py``) prints the report as one record; anything else — a
missing interpreter, a crash, a hang, garbage on stdout — makes every framework fact unknown,
with the reason.

The child also reports the CUDA distributions its ``sys.path`` resolves, torch's pins and
companions, and the CUDA libraries the process mapped (``dist[i]``, ``companion[i]``,
``cudalib[i]``); CONFIG tells it which distributions to list, from ``rules/data``.  Its first
record after "started" is its ``sys.path``: this probe scans those folders for device code
(``cuda_doctor.framework.fatbin``, the ``fatbin.*`` facts) while the child imports torch.

When the smoke run follows in the same pipeline run, the child is not ended after its report:
it waits in ``ctx.handoff`` (as ``TORCH_CHILD``) until the smoke probe asks it to run the smoke
steps, so that torch is imported once per check.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.base import children
from cuda_doctor.base.process import CommandResult
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework._child import LIBRARY_FACTS, PACKAGE_FACTS, TENSORFLOW_FACTS, TORCH_FACTS
from cuda_doctor.framework.fatbin.collect import FATBIN_FACTS, budget, scan_facts
from cuda_doctor.framework.fatbin.collect import all_unknown as fatbin_unknown

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
#: The name the torch child is left under in ``ctx.handoff`` for the smoke probe.
TORCH_CHILD = "torch"

#: Every fact this probe is responsible for; each ends up known or unknown.  The child script
#: (self-contained: it runs in the target interpreter) names the torch and TensorFlow ones.
FRAMEWORK_FACTS: tuple[str, ...] = (
    "framework.python",
    "framework.python_version",
    *PACKAGE_FACTS,
    "torch.installed",
    *TORCH_FACTS,
    *LIBRARY_FACTS,
    "tensorflow.installed",
    *TENSORFLOW_FACTS,
)

_PREFIXES = ("framework.", "torch.", "tensorflow.", "dist[", "companion[", "cudalib[")
#: Everything the probe answers for: its child's facts, and the fatbin scan's beside them.
ALL_FACTS = (*FRAMEWORK_FACTS, *FATBIN_FACTS)

#: ``import torch`` alone takes 5-7 s cold on a GPU machine, TensorFlow longer; a general
#: probe timeout of a few seconds would report a healthy install as hung.
DEFAULT_MIN_TIMEOUT = 60.0
#: The child prints its "started" record before importing anything heavy, so an interpreter
#: that does not start at all is given up on after max(--timeout, this), not after a minute.
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
        # the child's limit, then killing it and reading its output (the scan runs within the limit)
        return self.timeout(ctx) + budget(ctx.timeout) + 30

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = self._collect(ctx)
        if facts.has("framework.python"):  # the interpreter ran: fixes may install into it
            facts.set("framework.pip", pip_command(ctx.python, ctx.path))
        return facts

    def _collect(self, ctx: ProbeContext) -> Facts:
        try:
            source = children.compose(CHILD_SCRIPT)
        except OSError as exc:
            return all_unknown(f"cannot read the framework probe's source: {exc.strerror or exc}")
        timeout = self.timeout(ctx)
        start_timeout = self.start_timeout(ctx)
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
        if keep:
            payload = child.wait_for(is_payload)
            if payload is not None:
                return _merged(shape(payload, ctx.python), fatbin)
        return _merged(interpret(child.finish(), ctx.python, timeout, start_timeout), fatbin)

    def _scan(self, ctx: ProbeContext, child: children.Child) -> Facts:
        """The fatbin scan of the folders on the child's sys.path (its first record after
        "started"), in this thread, while the child goes on with ``import torch``."""
        first = child.wait_for(lambda record: "paths" in record or is_payload(record))
        paths = first.get("paths") if first is not None else None
        if not isinstance(paths, dict):
            return fatbin_unknown(f"{ctx.python} did not report its sys.path to the framework probe")
        return scan_facts(paths, budget(ctx.timeout), self.fatbin_cache)


def is_payload(record: dict[str, Any]) -> bool:
    """The child's report: any record but the protocol's own and its ``{"paths": …}``."""
    return not children.is_progress(record) and "paths" not in record


def _merged(facts: Facts, fatbin: Facts) -> Facts:
    facts.merge(fatbin)
    return facts


def pip_command(python: str, path: str) -> str:
    """How a fix runs pip for ``python``: plain ``pip`` only when the first ``pip`` on ``path``
    is that interpreter's own (its ``#!`` line names an interpreter in the same folder that is
    the same file), else ``<python> -m pip``, which always installs into ``python``."""
    found = shutil.which(python, path=path) if os.sep not in python else python
    interpreter = os.path.abspath(found or python)
    pip = shutil.which("pip", path=path)
    if pip is not None and _same_interpreter(_shebang(pip), interpreter):
        return "pip"
    return f"{shlex.quote(interpreter)} -m pip"


def _shebang(script: str) -> str | None:
    try:
        with open(script, "rb") as handle:
            first = handle.read(512).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    return words[0] if len(words) == 1 else None  # "/usr/bin/env python3" names no file


def _same_interpreter(named: str | None, interpreter: str) -> bool:
    # one folder (a venv's bin/python and bin/python3 are the same environment) and one file
    # (/usr/bin/pip of python3.11 is not python3.12's)
    if named is None or not os.path.isabs(named):
        return False
    same_folder = os.path.dirname(os.path.normpath(named)) == os.path.dirname(os.path.normpath(interpreter))
    return same_folder and os.path.realpath(named) == os.path.realpath(interpreter)


def child_config() -> dict[str, Any]:
    """What the child lists: the CUDA distributions and torch's companions (``rules/data``)."""
    from cuda_doctor.tables import load_table

    libraries = load_table("cuda_libraries")["child"]
    companions = {row["name"]: row["package"] for row in load_table("companions")["companion"]}
    return {
        "distributions": list(libraries["distributions"]),
        "distribution_prefixes": list(libraries["distribution_prefixes"]),
        "companions": companions,
    }


def interpret(result: CommandResult, python: str, timeout: float, start_timeout: float | None = None) -> Facts:
    """Turn the child's run into facts, or into one reason why there are none."""
    if result.timed_out:
        began = bool(children.parse_records(result.stdout))
        if start_timeout is not None and not began:
            return all_unknown(
                f"{python} did not start the framework probe within {start_timeout:g} s"
                " (it printed nothing; is it a working Python?)"
            )
        return all_unknown(f"{python} did not answer in {timeout:g} s")
    if result.returncode is None:
        return all_unknown(f"could not run {python}: {result.error}")
    payload = find_payload(result.stdout)
    if payload is None:
        if result.returncode != 0:
            status = _status(result.returncode)
            return all_unknown(f"{python} exited with {status}{_last_line(result)}")
        shown = _other_output(result.stdout)[:200]
        said = f": {shown!r}" if shown else " (empty output)"
        return all_unknown(f"{python} printed no JSON report{said}{children.cut_note(result)}")
    return shape(payload, python)


def find_payload(stdout: str) -> dict[str, Any] | None:
    """The child's report: the last record that is not one of the protocol's own."""
    records = [record for record in children.parse_records(stdout) if is_payload(record)]
    return records[-1] if records else None


def shape(payload: dict[str, Any], python: str) -> Facts:
    """Keep the framework facts of the child's report; say why any expected one is missing."""
    facts = Facts()
    values = payload.get("values")
    unknown = payload.get("unknown")
    if not isinstance(values, dict) or not isinstance(unknown, dict):
        return all_unknown(f"{python} printed a report without 'values' and 'unknown' objects")
    for name, value in values.items():
        if isinstance(name, str) and name.startswith(_PREFIXES):
            facts.set(name, value)
    failed = facts.get("torch.import_error")
    for name, reason in unknown.items():
        if isinstance(name, str) and name.startswith(_PREFIXES):
            # every torch fact is missing for the one reason: say it with the traceback's last line
            why = f"import torch failed: {failed}" if failed and name.startswith("torch.") else str(reason)
            facts.mark_unknown(name, why)
    for name in FRAMEWORK_FACTS:
        if name not in facts.values and name not in facts.unknown:
            facts.mark_unknown(name, f"{python} did not report it")
    return facts


def all_unknown(reason: str) -> Facts:
    facts = Facts()
    for name in FRAMEWORK_FACTS:
        facts.mark_unknown(name, reason)
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
    lines = stdout.splitlines()
    return "\n".join(line for line in lines if children.parse_record(line) is None).strip()


PROBE = FrameworkProbe()

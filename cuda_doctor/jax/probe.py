"""Phase 1: what the target interpreter's JAX has installed and imports (``jax.*``).  In a pipeline
run the child then brings its backend up (and compiles the smoke step) while torch imports, and
is left in ``ctx.handoff`` for ``gpu_probe``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.base import children
from cuda_doctor.base.paths import cache_dir
from cuda_doctor.base.process import CommandResult
from cuda_doctor.core.facts import Facts, reported
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.jax._child import BACKEND_FACTS, STATIC_FACTS

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
#: The name the JAX child is left under in ``ctx.handoff`` for the phase-2 probe.
JAX_CHILD = "jax"
#: JAX's environment variables about GPU memory and platforms, recorded as the user set them.
MEMORY_VARIABLES = (
    "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_FLAGS", "JAX_PLATFORMS", "JAX_PLATFORM_NAME",
)  # fmt: skip
#: Every fact of this probe and of the phase-2 probe; each ends up known or unknown.
JAX_FACTS: tuple[str, ...] = ("jax.installed", "jax.python", "jax.python_version", *STATIC_FACTS)
ALL_JAX_FACTS: tuple[str, ...] = (*JAX_FACTS, *BACKEND_FACTS)
#: XLA's flag for a folder of per-fusion autotuning results (keyed by GPU model, fusion, XLA version).
AUTOTUNE_FLAG = "--xla_gpu_per_fusion_autotune_cache_dir"
#: ``import jax`` may be slow on a network file system.
DEFAULT_MIN_TIMEOUT = 60.0


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: the user's, with preallocation off (autotuning stays as the user has it)."""
    return {**env, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def user_settings(env: Mapping[str, str]) -> dict[str, str]:
    """``jax.env``: the memory and platform variables the user has set, as set."""
    return {name: env[name] for name in MEMORY_VARIABLES if name in env}


def autotune_cache(env: Mapping[str, str]) -> str | None:
    """The folder the child has XLA keep its GEMM autotuning results in, so that a later check
    need not tune again; None when the user's XLA_FLAGS name one, or ours could not be written."""
    if AUTOTUNE_FLAG in env.get("XLA_FLAGS", ""):
        return None
    try:
        folder = cache_dir() / "xla-autotune"
        existing = next(path for path in (folder, *folder.parents) if path.exists())
    except OSError:  # a folder on the way that cannot be searched; no folder for a cache (cache_dir)
        return None
    if any(c.isspace() or c in "'\"" for c in str(folder)):
        return None  # XLA splits XLA_FLAGS at whitespace
    return str(folder) if existing.is_dir() and os.access(existing, os.W_OK | os.X_OK) else None


def child_timeout(ctx: ProbeContext, floor: float = DEFAULT_MIN_TIMEOUT) -> float:
    return max(ctx.timeout, floor)


def start_child(ctx: ProbeContext, *, wait: bool, timeout: float, what: str = "jax") -> children.Child:
    """The JAX child, told whether to wait for orders after its report."""
    report = ctx.step_progress
    return children.Child(
        ctx.python,
        children.compose(CHILD_SCRIPT),  # with the child-side readers it names
        [json.dumps({"then": "wait", "autotune_cache": autotune_cache(ctx.env)} if wait else {"then": "exit"})],
        env=child_env(ctx.env),
        timeout=timeout,
        start_timeout=children.start_timeout(ctx.timeout, timeout),
        stdin=wait,
        on_step=None if report is None else lambda step: report(what, step),
    )


def is_report(record: dict[str, Any]) -> bool:
    return "values" in record and "unknown" in record


def is_backend(record: dict[str, Any]) -> bool:
    return isinstance(record.get("backend"), dict)


def wait_backend(child: children.Child, timeout: float) -> dict[str, Any] | None:
    """The backend record the child prints after its report, within ``timeout`` s from now."""
    child.give_more_time(timeout)
    return child.wait_for(is_backend)


def why_no_answer(result: CommandResult, limit: float) -> str:
    if result.timed_out:
        steps = [r["step"] for r in children.parse_records(result.stdout) if isinstance(r.get("step"), str)]
        where = f" while running: {steps[-1]}" if steps else ""
        return f"the JAX child was killed after {limit:g} s{where}"
    last = children.last_line(result.stderr)
    return f"the JAX child exited with status {result.returncode} initialising the JAX backend{last}"


@dataclass
class JaxProbe:
    name: str = "jax"
    min_timeout: float = DEFAULT_MIN_TIMEOUT

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast  # --fast promises no framework import

    def deadline(self, ctx: ProbeContext) -> float:
        # the import, then the backend; the smoke step's compilation; then kills and reads
        return 2 * child_timeout(ctx, self.min_timeout) + (ctx.smoke_timeout if ctx.smoke else 0) + 30

    def collect(self, ctx: ProbeContext) -> Facts:
        timeout = child_timeout(ctx, self.min_timeout)
        keep = ctx.handoff.accepting  # the phase-2 probe reports the backend of this child
        child, facts = first_report(ctx, wait=keep, timeout=timeout)
        if child is None:
            return facts
        if keep:  # also when it ended: the phase-2 probe then knows that there is no backend
            ctx.handoff.leave(JAX_CHILD, child)
        if keep and serving(child, facts):
            get_ready(ctx, child, facts, timeout)
            return facts
        child.stop(grace=1.0)  # it has nothing more to do: it ends by itself
        facts.mark_all_unknown(BACKEND_FACTS, _no_backend(facts, keep))  # no backend will be initialised: say why
        return facts


def first_report(
    ctx: ProbeContext, *, wait: bool, timeout: float, what: str = "jax"
) -> tuple[children.Child | None, Facts]:
    """The JAX child, told whether to wait for orders, and the facts of its report (None for a
    child that could not be started: the facts say why)."""
    try:
        child = start_child(ctx, wait=wait, timeout=timeout, what=what)
    except OSError as exc:
        return None, all_unknown(f"cannot read {CHILD_SCRIPT}: {exc.strerror or exc}", ctx.env)
    report = child.wait_for(is_report) if wait else None
    facts = interpret(child.finish(), ctx.python, timeout) if report is None else shape(report, ctx.python)
    facts.set("jax.env", user_settings(ctx.env))
    return child, facts


def serving(child: children.Child, facts: Facts) -> bool:
    """The child imported jax and serves orders (its backend comes next)."""
    return child.result is None and facts.get("jax.installed") is True and facts.get("jax.import_error") is None


def get_ready(ctx: ProbeContext, child: children.Child, facts: Facts, timeout: float) -> None:
    """Before phase 1 ends: the backend up and, when a smoke run follows and JAX has a GPU, the smoke
    step compiled.  A child that does not answer in time is stopped now, and the facts say why."""
    record = wait_backend(child, timeout)
    if record is None:
        facts.mark_all_unknown(BACKEND_FACTS, why_no_answer(child.finish(), timeout))
        return
    values = record["backend"].get("values")
    gpus = values.get("jax.gpu_count") if isinstance(values, dict) else None
    if ctx.smoke and isinstance(gpus, int) and gpus > 0:
        from cuda_doctor.jax.smoke_step import prepare  # the smoke scripts' runner, for a full check only

        prepare(ctx, child)


def _no_backend(facts: Facts, kept: bool) -> str:
    if facts.get("jax.installed") is False:
        return str(facts.unknown.get("jax.version") or "jax is not installed")
    if facts.get("jax.import_error"):
        return f"import jax failed: {facts.get('jax.import_error')}"
    if not facts.has("jax.installed"):
        return facts.unknown_reason("jax.installed")
    if not kept:
        return "the JAX backend is initialised only in a full check (or cuda-doctor smoke)"
    return "the JAX child ended before its backend was initialised"


def interpret(result: CommandResult, python: str, timeout: float) -> Facts:
    """The child's report as facts, or one reason for all of them."""
    records = [record for record in children.parse_records(result.stdout) if is_report(record)]
    if records:
        return shape(records[-1], python)
    if result.timed_out and not children.parse_records(result.stdout):
        return all_unknown(f"{python} did not start the JAX probe (it printed nothing; is it a working Python?)")
    if result.timed_out:
        return all_unknown(f"{python} did not answer the JAX probe in {timeout:g} s")
    if result.returncode is None:
        return all_unknown(f"could not run {python}: {result.error}")
    last = children.last_line(result.stderr.strip() or result.stdout) + children.cut_note(result)
    return all_unknown(f"{python} exited with status {result.returncode} in the JAX probe{last}")


def shape(payload: Mapping[str, Any], python: str, names: tuple[str, ...] = JAX_FACTS) -> Facts:
    """Keep the ``jax.`` facts of a child's report; say why any expected one is missing."""
    facts = reported(payload, ("jax.",), names, python)
    if facts is None:
        return all_unknown(f"{python} printed a JAX report without 'values' and 'unknown' objects")
    return facts


def all_unknown(reason: str, env: Mapping[str, str] | None = None) -> Facts:
    facts = Facts()
    facts.mark_all_unknown(ALL_JAX_FACTS, reason)
    if env is not None:
        facts.set("jax.env", user_settings(env))
    return facts


PROBE = JaxProbe()

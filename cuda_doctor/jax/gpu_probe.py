"""Phase 2: the backend JAX chooses, and the JAX smoke step, in the JAX child.

Initialising JAX's backend creates a context and allocates memory on every GPU, so it waits for
phase 2, after the GPU probe has read the idle GPU; and like every phase-2 probe it runs alone,
after the torch smoke run, so that neither measures the other.  The child is the one the phase-1
probe left in ``ctx.handoff`` (``cuda-doctor check``: jax is imported once), else a child of its
own (``cuda-doctor smoke``), which then reports the phase-1 facts too.

Facts: the backend ones of ``_child.BACKEND_FACTS`` and, with the smoke run, ``smoke.jax_level.``
``{status,error,error_step,seconds,limit_s,last_step,jax_version,backend,device_count}`` (status
"ok" | "failed" | "timeout" | "skipped") and, per GPU JAX has (``smoke[i]`` is its device id,
the CUDA ordinal), ``smoke[i].jax_{kind,error,bf16_tflops,bf16_ok,bf16_rel_err,bf16_tolerance,``
``compile_seconds}``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from cuda_doctor import children
from cuda_doctor.facts import Facts, indexed
from cuda_doctor.jax._child import BACKEND_FACTS
from cuda_doctor.jax.probe import (
    DEFAULT_MIN_TIMEOUT,
    JAX_CHILD,
    all_unknown,
    child_timeout,
    interpret,
    is_report,
    shape,
    start_child,
    user_settings,
)
from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.process import CommandResult
from cuda_doctor.smoke.runner import ChildRun, child_run, script_source

#: Per-GPU figures the smoke step reports, as ``smoke[i].jax_<key>``.
DEVICE_KEYS = ("kind", "error", "bf16_tflops", "bf16_ok", "bf16_rel_err", "bf16_tolerance", "compile_seconds")
SMOKE_SIZE = 4096


def is_backend(record: dict[str, Any]) -> bool:
    return isinstance(record.get("backend"), dict)


@dataclass
class JaxGpuProbe:
    name: str = "jax_gpu"
    min_timeout: float = DEFAULT_MIN_TIMEOUT

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast

    def deadline(self, ctx: ProbeContext) -> float:
        # a child of its own (import jax), the backend, the smoke step; then kills and reads
        return 2 * child_timeout(ctx, self.min_timeout) + ctx.smoke_timeout + 30

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        child = ctx.handoff.take(JAX_CHILD)
        if child is None:  # no phase 1 before this one: the child's report comes first
            child, facts = self._own_child(ctx)
            if child is None:
                return facts
        elif child.result is not None:
            return facts  # it ended in phase 1 (no jax, or import jax failed), which said why
        try:
            if self._backend(ctx, child, facts) and ctx.smoke:
                facts.merge(smoke(ctx, child, facts))
        finally:
            child.stop(grace=1.0)  # told by its closed stdin; killed a second later
        return facts

    def _own_child(self, ctx: ProbeContext) -> tuple[children.Child | None, Facts]:
        timeout = child_timeout(ctx, self.min_timeout)
        try:
            child = start_child(ctx, wait=True, timeout=timeout, what="jax_gpu")
        except OSError as exc:
            return None, all_unknown(f"cannot read the JAX probe's script: {exc.strerror or exc}", ctx.env)
        report = child.wait_for(is_report)
        facts = interpret(child.finish(), ctx.python, timeout) if report is None else shape(report, ctx.python)
        facts.set("jax.env", user_settings(ctx.env))
        if report is not None and facts.get("jax.installed") is True and facts.get("jax.import_error") is None:
            return child, facts
        child.stop(grace=1.0)
        return None, facts  # the child's report said why there is no backend (BACKEND_FACTS unknown)

    def _backend(self, ctx: ProbeContext, child: children.Child, facts: Facts) -> bool:
        """Order the backend; True when the child answered (and waits for more)."""
        limit = child_timeout(ctx, self.min_timeout)
        child.give_more_time(limit)
        if not child.send({"backend": {}}):
            _all_backend_unknown(facts, "the JAX child ended before its backend was initialised")
            return False
        record = child.wait_for(is_backend)
        if record is None:
            _all_backend_unknown(facts, _why_no_answer(child.stop(), limit, "initialising the JAX backend"))
            return False
        facts.merge(shape(record["backend"], ctx.python, tuple(BACKEND_FACTS)))
        return True


def _all_backend_unknown(facts: Facts, reason: str) -> None:
    for name in BACKEND_FACTS:
        facts.mark_unknown(name, reason)


def _why_no_answer(result: CommandResult, limit: float, doing: str) -> str:
    records = children.parse_records(result.stdout)
    steps = [r["step"] for r in records if isinstance(r.get("step"), str)]
    where = f" while running: {steps[-1]}" if steps else ""
    if result.timed_out:
        return f"the JAX child was killed after {limit:g} s{where}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    last = f": {children.excerpt(lines[-1])}" if lines else ""
    return f"the JAX child exited with status {result.returncode} {doing}{last}"


def smoke(ctx: ProbeContext, child: children.Child, facts: Facts) -> Facts:
    """The JAX smoke step in the child, within ``ctx.smoke_timeout`` seconds."""
    out = Facts()
    prefix = "smoke.jax_level"
    limit = float(ctx.smoke_timeout)
    out.set(f"{prefix}.limit_s", limit)
    gpus = facts.get("jax.gpu_count")
    if not isinstance(gpus, int) or gpus < 1:
        out.set(f"{prefix}.status", "skipped")
        backend = facts.get("jax.backend") or "unknown"
        out.set(f"{prefix}.error", f"JAX has no GPU (its backend is {backend}): nothing to run the JAX step on")
        return out
    report = ctx.step_progress
    child.on_step = None if report is None else lambda step: report("smoke, jax level", step)
    child.give_more_time(limit)
    sent = time.monotonic()
    config = json.dumps({"size": SMOKE_SIZE})
    if not child.send({"run": script_source("jax"), "argv": [config]}):
        out.set(f"{prefix}.status", "failed")
        out.set(f"{prefix}.error", "the JAX child ended before the smoke step")
        return out
    run = child_run("jax", child.finish(), limit, ctx.python, script="the JAX smoke step")
    smoke_facts(out, run, time.monotonic() - sent)
    return out


def smoke_facts(out: Facts, run: ChildRun, seconds: float) -> None:
    prefix = "smoke.jax_level"
    result = run.result or {}
    status = "timeout" if run.timed_out else str(result.get("status") or "failed")
    out.set(f"{prefix}.status", status)
    out.set(f"{prefix}.error", run.error or result.get("error"))
    out.set(f"{prefix}.error_step", run.last_step if run.timed_out else result.get("error_step"))
    out.set(f"{prefix}.seconds", round(seconds, 2))
    out.set(f"{prefix}.last_step", run.last_step)
    for key in ("jax_version", "backend", "device_count"):
        if key in result:
            out.set(f"{prefix}.{key}", result[key])
    # per-GPU records arrive as each GPU finishes, so a later hang keeps earlier figures
    for device in result.get("devices") or run.parsed.devices:
        i = int(device["index"])
        for key in DEVICE_KEYS:
            name = indexed("smoke", i, f"jax_{key}")
            if key in device:
                out.set(name, device[key])
            elif key != "compile_seconds":
                out.mark_unknown(name, f"not measured: {device.get('error') or 'the JAX step did not report it'}")


PROBE = JaxGpuProbe()

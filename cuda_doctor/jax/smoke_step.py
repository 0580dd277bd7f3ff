"""The JAX smoke step (``cuda_doctor/smoke/jax_level.py``) in the JAX child: compiled in phase 1
(``prepare``) and measured in phase 2 (``smoke``), before the torch smoke run."""

from __future__ import annotations

import json
import time
from typing import Any

from cuda_doctor.base import children
from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.smoke.runner import ChildRun, child_run, is_result, result_run, script_source

#: Per-GPU figures the smoke step reports, as ``smoke[i].jax_<key>``.
DEVICE_KEYS = ("kind", "error", "bf16_tflops", "bf16_ok", "bf16_rel_err", "bf16_tolerance", "compile_seconds")
SMOKE_SIZE = 4096
PREFIX = "smoke.jax_level"
WHAT = "smoke, jax level"  # the step progress's name for it


def is_prepared(record: dict[str, Any]) -> bool:
    return isinstance(record.get("prepared"), dict)


def _follow(ctx: ProbeContext, child: children.Child) -> None:
    report = ctx.step_progress
    child.on_step = None if report is None else lambda step: report(WHAT, step)


def prepare(ctx: ProbeContext, child: children.Child, config: dict[str, Any] | None = None) -> None:
    """Compile the step in the child now; one that does not answer in time is killed (never beside torch's run)."""
    _follow(ctx, child)
    child.give_more_time(float(ctx.smoke_timeout))
    argv = [json.dumps({"size": SMOKE_SIZE, **(config or {}), "prepare": True})]
    sent = child.send({"run": script_source("jax"), "argv": argv})
    if not sent or child.wait_for(lambda record: is_prepared(record) or is_result(record)) is None:
        child.finish()  # killed at its deadline, or reaped after its end


def smoke(ctx: ProbeContext, child: children.Child, facts: Facts) -> Facts:
    """The JAX smoke step: measured when ``prepare`` compiled it, else run whole (or what it said in ``prepare``)."""
    out = Facts()
    limit = float(ctx.smoke_timeout)
    out.set(f"{PREFIX}.limit_s", limit)
    gpus = facts.get("jax.gpu_count")
    if not isinstance(gpus, int) or gpus < 1:
        out.set(f"{PREFIX}.status", "skipped")
        backend = facts.get("jax.backend") or "unknown"
        out.set(f"{PREFIX}.error", f"JAX has no GPU (its backend is {backend}): nothing to run the JAX step on")
        return out
    _follow(ctx, child)
    prepared = child.seen(is_prepared)
    spent = float(prepared["prepared"].get("seconds") or 0.0) if prepared else 0.0
    sent = time.monotonic()
    order = _order(child, prepared is not None)
    if order is not None:
        child.give_more_time(max(limit - spent, 1.0))
        if not child.send(order):
            out.set(f"{PREFIX}.status", "failed")
            out.set(f"{PREFIX}.error", "the JAX child ended before the smoke step")
            return out
    # read once its result is in: the probe lets the child end beside the next probe
    run = result_run("jax", child) or child_run("jax", child.finish(), limit, ctx.python, script="the JAX smoke step")
    smoke_facts(out, run, spent + time.monotonic() - sent)
    return out


def _order(child: children.Child, prepared: bool) -> dict[str, Any] | None:
    """What the child is told: measure, or run the whole step; None when it already ended in ``prepare``."""
    if child.result is not None or child.seen(is_result) is not None:
        return None
    if prepared:
        return {"measure": True}
    return {"run": script_source("jax"), "argv": [json.dumps({"size": SMOKE_SIZE})]}


def smoke_facts(out: Facts, run: ChildRun, seconds: float) -> None:
    result = run.result or {}
    status = "timeout" if run.timed_out else str(result.get("status") or "failed")
    out.set(f"{PREFIX}.status", status)
    out.set(f"{PREFIX}.error", run.error or result.get("error"))
    out.set(f"{PREFIX}.error_step", run.last_step if run.timed_out else result.get("error_step"))
    out.set(f"{PREFIX}.seconds", round(seconds, 2))
    out.set(f"{PREFIX}.last_step", run.last_step)
    for key in ("jax_version", "backend", "device_count"):
        if key in result:
            out.set(f"{PREFIX}.{key}", result[key])
    # per-GPU records arrive as each GPU finishes, so a later hang keeps earlier figures
    for device in result.get("devices") or run.parsed.devices:
        i = int(device["index"])
        for key in DEVICE_KEYS:
            name = indexed("smoke", i, f"jax_{key}")
            if key in device:
                out.set(name, device[key])
            elif key != "compile_seconds":
                out.mark_unknown(name, f"not measured: {device.get('error') or 'the JAX step did not report it'}")

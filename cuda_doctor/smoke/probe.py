"""The smoke probe: run the smoke children and record what they said as ``smoke.*`` facts
(``smoke[i]`` is CUDA ordinal i)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import nvml_disabled
from cuda_doctor.gpu.nvml.events import XidEvents
from cuda_doctor.smoke.runner import ChildRun, SmokeRun, run_smoke

#: Per-GPU figures the framework level measures, and the step that measures each.
MEASURED: dict[str, str] = {
    "alloc_ok": "allocate",
    "h2d_pageable_gbps": "h2d pageable",
    "h2d_pinned_gbps": "h2d pinned",
    "d2h_pinned_gbps": "h2d pinned",
    **{f"{d}_{key}": f"matmul {d}" for d in ("fp32", "fp16", "bf16") for key in ("tflops", "ok", "rel_err")},
    "matmul_ok": "matmul fp32",
    "launch_us": "launch latency",
    "amp_step_ok": "amp step",
    "conv_ok": "conv2d cudnn",
}
#: Per-GPU readings that need NVML in the target interpreter.
UNDER_LOAD = (
    "pcie_gen_under_load",
    "pcie_width_under_load",
    "pcie_gen_max",
    "pcie_width_max",
    "clock_event_reason_names_under_load",
    "power_w_under_load",
    "power_limit_w",
    "power_default_limit_w",
    "other_process_count",
    "other_process_mib",
)
#: Plain values copied as they are when the child reported them.
COPIED = (
    "name",
    "capability",
    "uuid",
    "memory_total_mib",
    "bf16_native",
    "fp32_tolerance",
    "fp16_tolerance",
    "bf16_tolerance",
    "amp_dtype",
    "amp_loss",
    "amp_grad_scaler",
    "conv_rel_err",
    "cudnn_version",
    "clock_event_reasons_under_load",
    "temperature_c_under_load",
    "cudnn_enabled",
    "step_seconds",
)
NO_DRIVER_ERROR = "no NVIDIA driver: libcuda.so.1 not found — the GPU smoke run could not run"


class SmokeProbe:
    """Runs the GPU smoke test in child processes; never prints, never raises."""

    name = "smoke"
    nvml: Any = None  # stands in for the pynvml module that listens for Xid events (tests)

    def applies(self, ctx: ProbeContext) -> bool:
        return ctx.smoke and not ctx.fast

    def deadline(self, ctx: ProbeContext) -> float:
        return ctx.smoke_timeout + 30  # both levels share smoke_timeout; then kills and reads

    def collect(self, ctx: ProbeContext) -> Facts:
        report = ctx.step_progress  # the runner's (level, step) as the context's (what, step)
        progress = None if report is None else lambda level, step: report(f"smoke, {level} level", step)
        listening = None if nvml_disabled(ctx.env) else XidEvents(self.nvml).start()
        try:
            facts = facts_from_run(run_smoke(ctx, progress), ctx)
        except Exception as exc:  # a broken runner must become a reason, not a traceback
            facts = Facts()
            facts.set("smoke.status", "failed")
            facts.set("smoke.error", f"the smoke run could not start: {type(exc).__name__}: {exc}")
        events, why = ([], "NVML is disabled (CUDA_DOCTOR_DISABLE_NVML)") if listening is None else listening.stop()
        if why is None:
            facts.set("smoke.xid_events", events)
        else:
            facts.mark_unknown("smoke.xid_events", why)
        return facts


PROBE = SmokeProbe()


def facts_from_run(run: SmokeRun, ctx: ProbeContext) -> Facts:
    facts = Facts()
    facts.set("smoke.limit_s", run.limit)
    facts.set("smoke.seconds", round(run.seconds, 2))
    facts.set("smoke.cuda_visible_devices", ctx.env.get("CUDA_VISIBLE_DEVICES"))
    facts.set("smoke.python", ctx.python)
    driver_status = _driver_facts(facts, run.driver)
    _stub_library_facts(facts, ctx.env)
    framework_status = _framework_facts(facts, run)
    _compile_facts(facts, run)
    reported = [facts.get("smoke.driver_level.device_count")]
    if facts.get("smoke.framework_level.cuda_available") is True:  # torch says 0 when CUDA did not start
        reported.append(facts.get("smoke.framework_level.device_count"))
    counts = [count for count in reported if isinstance(count, int)]
    if counts:
        facts.set("smoke.device_count", max(counts))
    else:  # not "no GPU found": the run never got as far as counting them
        why = facts.get("smoke.driver_level.error") or "neither level reported how many GPUs it saw"
        facts.mark_unknown("smoke.device_count", f"the smoke run did not reach the GPUs ({why})")
    _overall(facts, run, driver_status, framework_status)
    return facts


def _driver_facts(facts: Facts, child: ChildRun) -> str:
    prefix = "smoke.driver_level"
    result = child.result or {}
    status = "timeout" if child.timed_out else str(result.get("status") or "failed")
    if child.interpreter_failed:
        status = "interpreter_failed"
    facts.set(f"{prefix}.status", status)
    facts.set(f"{prefix}.error", child.error or result.get("error"))
    facts.set(f"{prefix}.error_name", result.get("error_name"))
    facts.set(f"{prefix}.seconds", round(child.seconds, 2))
    facts.set(f"{prefix}.last_step", child.last_step)
    for key in ("library", "device_count", "driver_cuda_version"):
        if key in result:
            facts.set(f"{prefix}.{key}", result[key])
        else:
            facts.mark_unknown(f"{prefix}.{key}", child.error or "the driver-level run did not report it")
    for device in result.get("devices", []):
        i = int(device["index"])
        facts.set(indexed("smoke", i, "vector_add_ok"), bool(device.get("vector_add_ok")))
        facts.set(indexed("smoke", i, "vector_add_error"), device.get("error"))
        facts.set(indexed("smoke", i, "vector_add_error_name"), device.get("error_name"))
        for key in ("name", "capability"):
            if key in device:
                facts.set(indexed("smoke", i, key), device[key])
    return status


STUB_LIBRARY = "CUDA_ERROR_STUB_LIBRARY"


def _stub_library_facts(facts: Facts, env: Mapping[str, str]) -> None:
    """The toolkit's stub libcuda (for linking only) was loaded: its folder, and how to drop it from LD_LIBRARY_PATH."""
    library = facts.get("smoke.driver_level.library")
    if facts.get("smoke.driver_level.error_name") != STUB_LIBRARY or not isinstance(library, str):
        return
    folder = os.path.dirname(library)
    facts.set("smoke.driver_level.library_dir", folder)
    entries = [entry for entry in env.get("LD_LIBRARY_PATH", "").split(":") if entry]
    kept = [entry for entry in entries if os.path.realpath(entry) != os.path.realpath(folder)]
    facts.set("smoke.driver_level.stub_on_ld_library_path", len(kept) < len(entries))
    if len(kept) == len(entries):
        facts.mark_unknown("smoke.driver_level.ld_library_path_fix", f"{folder} is not on LD_LIBRARY_PATH")
        return
    fix = f"export LD_LIBRARY_PATH={shlex.quote(':'.join(kept))}" if kept else "unset LD_LIBRARY_PATH"
    facts.set("smoke.driver_level.ld_library_path_fix", fix)


def _framework_facts(facts: Facts, run: SmokeRun) -> str:
    prefix = "smoke.framework_level"
    child = run.framework
    if child is None:
        facts.set(f"{prefix}.status", "skipped")
        facts.set(f"{prefix}.error", run.framework_skipped)
        return "skipped"
    result = child.result or {}
    raw = str(result.get("status") or "failed")
    status = "timeout" if child.timed_out else ("skipped" if raw == "no_torch" else raw)
    facts.set(f"{prefix}.status", status)
    error = child.error or result.get("error")
    if raw == "no_torch":
        error = f"torch is not installed for {facts.get('smoke.python')} ({result.get('error')})"
    facts.set(f"{prefix}.error", error)
    facts.set(f"{prefix}.error_step", child.last_step if child.timed_out else result.get("error_step"))
    facts.set(f"{prefix}.seconds", round(child.seconds, 2))
    facts.set(f"{prefix}.last_step", child.last_step)
    reported = ("torch_version", "cuda_available", "device_count", "import_seconds", "cuda_init_seconds", "nvml_error")
    for key in reported:
        if key in result:
            facts.set(f"{prefix}.{key}", result[key])
    # per-GPU records arrive as each GPU finishes, so a later hang keeps earlier figures
    for device in result.get("devices") or child.parsed.devices:
        _device_facts(facts, device, result.get("nvml_error"))
    return status


def _compile_facts(facts: Facts, run: SmokeRun) -> None:
    """The compile level's run, and each GPU's ``triton_compile`` and ``torch_compile``: ``ok``,
    ``wrong result`` or Triton's or Inductor's own error; unknown with the reason where it did not run."""
    prefix = "smoke.compile_level"
    child = run.compiled
    result = (child.result if child is not None else None) or {}
    if child is None:
        facts.set(f"{prefix}.status", "skipped")
        why = f"the compile level did not run: {run.compile_skipped}"
    else:
        facts.set(f"{prefix}.status", "timeout" if child.timed_out else str(result.get("status") or "failed"))
        facts.set(f"{prefix}.seconds", round(child.seconds, 2))
        facts.set(f"{prefix}.last_step", child.last_step)
        why = child.error or result.get("error") or "the compile level did not report it"
    facts.set(f"{prefix}.error", run.compile_skipped if child is None else child.error or result.get("error"))
    for key in ("import_seconds", "compile_seconds", "compile_cache", "compile_cache_error"):
        if key in result:
            facts.set(f"{prefix}.{key}", result[key])
    devices = {int(d["index"]): d for d in (result.get("devices") or (child.parsed.devices if child else ()))}
    # every GPU the other levels named gets the compile results, or why there are none
    for i in sorted({*facts.indices("smoke"), *devices}):
        device = devices.get(i) or {}
        for key in ("triton_compile", "torch_compile"):
            if key in device:
                facts.set(indexed("smoke", i, key), device[key])
            else:
                facts.mark_unknown(indexed("smoke", i, key), str(device.get("error") or why))
        if isinstance(device.get("step_seconds"), dict):
            earlier = facts.get(indexed("smoke", i, "step_seconds"))
            steps = dict(earlier) if isinstance(earlier, dict) else {}
            facts.set(indexed("smoke", i, "step_seconds"), {**steps, **device["step_seconds"]})


def _device_facts(facts: Facts, device: dict[str, Any], nvml_error: str | None) -> None:
    i = int(device["index"])

    def name(key: str) -> str:
        return indexed("smoke", i, key)

    errors = device.get("errors") or []
    first = errors[0] if errors else None
    facts.set(name("error"), f"{first['step']}: {first['error']}" if first else None)
    facts.set(name("error_step"), first["step"] if first else None)
    for key in COPIED:
        if key in device:
            facts.set(name(key), device[key])
    failed_steps = {str(e.get("step", "")): str(e.get("error", "")) for e in errors}
    for key, step in MEASURED.items():
        if key in device:
            facts.set(name(key), device[key])
            continue
        label = f"{step} on GPU {i}"
        if key.startswith("bf16") and device.get("bf16_native") is False:
            reason = f"bf16 is not native on compute capability {device.get('capability')} (needs 8.0)"
        elif label in failed_steps:
            reason = f"{label} failed: {failed_steps[label]}"
        elif first is not None:
            reason = f"not measured: {first['step']} failed first"
        else:
            reason = f"{label} did not report it"
        facts.mark_unknown(name(key), reason)
    for key in UNDER_LOAD:
        if key in device:
            facts.set(name(key), device[key])
        else:
            problems = device.get("nvml_errors") or {}
            problem = problems.get(key) or "; ".join(f"{k}: {v}" for k, v in problems.items())
            facts.mark_unknown(name(key), problem or nvml_error or "NVML did not report it")
    fp32, bf16 = device.get("fp32_tflops"), device.get("bf16_tflops")
    if isinstance(fp32, (int, float)) and isinstance(bf16, (int, float)) and fp32 > 0:
        facts.set(name("amp_speedup_bf16"), round(bf16 / fp32, 1))
    else:
        missing = facts.reason(name("bf16_tflops")) or facts.reason(name("fp32_tflops"))
        facts.mark_unknown(name("amp_speedup_bf16"), missing or "fp32 or bf16 was not measured")


def _overall(facts: Facts, run: SmokeRun, driver: str, framework: str) -> None:
    levels = [child for child in (run.driver, run.framework) if child is not None]
    broken = [child for child in levels if child.interpreter_failed]
    if broken:
        facts.set("smoke.status", "failed")
        facts.set("smoke.error", broken[0].error)
        facts.set("smoke.interpreter_error", broken[0].error)
        facts.set("smoke.interpreter_stderr", broken[0].stderr_tail[-1000:] or None)
        return
    timed_out = [child for child in levels if child.timed_out]
    if timed_out:
        facts.set("smoke.status", "timeout")
        facts.set("smoke.error", timed_out[0].error)
        facts.set("smoke.stopped_at", timed_out[0].last_step)
        return
    error = None
    if driver == "no_driver":  # a run that could not happen is not a pass
        error = NO_DRIVER_ERROR
    elif driver != "ok":
        error = f"driver level: {facts.get('smoke.driver_level.error')}"
    elif framework == "failed":
        error = f"framework level: {facts.get('smoke.framework_level.error')}"
    facts.set("smoke.status", "ok" if error is None else "failed")
    facts.set("smoke.error", error)

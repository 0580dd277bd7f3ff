"""``check --format prometheus``: the text exposition format (version 0.0.4) for node_exporter's
textfile collector (docs/prometheus.md).

One series per rule with its status (the worst over its subjects), the subjects' statuses of the
rules judged per GPU or per image, the totals, the exit status, the smoke run's figures per GPU in
base units (FLOP/s, bytes per second, seconds), when the check ran and how long it took, and the
version.  No sample carries a timestamp: the textfile collector refuses them.  No host name, path or
variable's value is written: node_exporter adds the instance, and the JSON report has the rest.
"""

from __future__ import annotations

import calendar
import math
import platform
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report import printable
from cuda_doctor.report.check.common import worst

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report
    from cuda_doctor.core.facts import Facts

PREFIX = "cuda_doctor"
#: The smoke run's per-GPU figures: fact (in ``smoke[i].``) → (metric, extra labels, factor to the base unit).
SMOKE_FIGURES: dict[str, tuple[str, dict[str, str], float]] = {
    **{
        f"{dtype}_tflops": ("smoke_matmul_flop_per_second", {"dtype": dtype}, 1e12)
        for dtype in ("fp32", "fp16", "bf16")
    },
    "h2d_pageable_gbps": ("smoke_copy_bytes_per_second", {"direction": "host_to_device", "memory": "pageable"}, 1e9),
    "h2d_pinned_gbps": ("smoke_copy_bytes_per_second", {"direction": "host_to_device", "memory": "pinned"}, 1e9),
    "d2h_pinned_gbps": ("smoke_copy_bytes_per_second", {"direction": "device_to_host", "memory": "pinned"}, 1e9),
    "launch_us": ("smoke_kernel_launch_seconds", {}, 1e-6),
}
#: The smoke run's per-GPU steps that pass or fail: fact → step label.
SMOKE_STEPS = {
    "alloc_ok": "allocate",
    "matmul_ok": "matmul",
    "fp16_ok": "matmul_fp16",
    "bf16_ok": "matmul_bf16",
    "amp_step_ok": "amp_step",
    "conv_ok": "conv2d",
}
HELP = {
    "build_info": "The cuda-doctor that wrote this file; always 1.",
    "check": "Each rule's status (the worst over its subjects); always 1, the status is the label.",
    "check_subjects": "How many subjects (GPUs, images) of a rule judged per subject have each status.",
    "check_results": "How many results have each status.",
    "check_exit_code": "The exit status of the check: 0 healthy, 1 a finding at --fail-on, 2 no verdict.",
    "check_timestamp_seconds": "When the check ran, in seconds since the Unix epoch.",
    "check_duration_seconds": "How long probing and judging took.",
    "probe_duration_seconds": "How long each probe took.",
    "driver_info": "The NVIDIA driver and the newest CUDA it supports; always 1.",
    "gpus": "How many GPUs the driver lists.",
    "smoke_matmul_flop_per_second": "Matrix multiply throughput of the smoke run, per GPU and data type.",
    "smoke_copy_bytes_per_second": "Host-device copy bandwidth of the smoke run, per GPU.",
    "smoke_kernel_launch_seconds": "Time to launch one small kernel in the smoke run, per GPU.",
    "smoke_step_ok": "Whether each step of the smoke run succeeded on each GPU (1) or not (0).",
}


@dataclass
class Family:
    name: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, **labels: str) -> None:
        self.samples.append((labels, value))


def render(report: Report, *, verbose: bool = False, terminal: bool = False, fail_on: Severity = Severity.ERROR) -> str:
    return render_prometheus(report, fail_on)


def render_prometheus(report: Report, fail_on: Severity = Severity.ERROR) -> str:
    families = [
        *_about_the_run(report, fail_on),
        *_rules(report.results),
        *_machine(report.facts),
        *_smoke(report.facts),
    ]
    return "".join(_family_text(family) for family in families if family.samples)


def _about_the_run(report: Report, fail_on: Severity) -> Iterable[Family]:
    from cuda_doctor import __version__

    build = Family("build_info")
    build.add(1, version=__version__, python=platform.python_version())
    yield build
    code = Family("check_exit_code")
    code.add(report.exit_code(fail_on), fail_on=fail_on.value)
    yield code
    when = Family("check_timestamp_seconds")
    stamp = _epoch(report.created)
    if stamp is not None:
        when.add(stamp)
    yield when
    took = Family("check_duration_seconds")
    if report.seconds is not None:
        took.add(report.seconds)
    yield took
    probes = Family("probe_duration_seconds")
    for name, value in sorted(report.facts.values.items()):
        probe, _, rest = name.removeprefix("probe.").partition(".")
        if name.startswith("probe.") and rest == "seconds" and _number(value):
            probes.add(float(value), probe=probe)
    yield probes


def _rules(results: list[Result]) -> Iterable[Family]:
    by_rule: dict[str, list[Result]] = {}
    for result in results:
        by_rule.setdefault(result.rule_id, []).append(result)
    status = Family("check")
    subjects = Family("check_subjects")
    for rule, judged in sorted(by_rule.items()):
        status.add(1, rule=rule, status=worst(judged).value)
        if any(r.subject is not None for r in judged):
            for each in Status:
                n = sum(r.status is each for r in judged)
                if n:
                    subjects.add(n, rule=rule, status=each.value)
    totals = Family("check_results")
    for each in Status:
        totals.add(sum(r.status is each for r in results), status=each.value)
    return [status, subjects, totals]


def _machine(facts: Facts) -> Iterable[Family]:
    driver = Family("driver_info")
    if facts.has("driver.version"):
        cuda = facts.get("driver.cuda_version")
        driver.add(1, version=str(facts.get("driver.version")), cuda_version=str(cuda or ""))
    gpus = Family("gpus")
    count = facts.get("gpu.count")
    if _number(count):
        gpus.add(float(count))
    return [driver, gpus]


def _smoke(facts: Facts) -> Iterable[Family]:
    families: dict[str, Family] = {}
    for index in facts.indices("smoke"):
        uuid = facts.get(f"smoke[{index}].uuid") or facts.get(f"gpu[{index}].uuid")
        gpu = {"gpu": str(index), "uuid": str(uuid or "")}
        for fact, (metric, labels, factor) in SMOKE_FIGURES.items():
            value = facts.get(f"smoke[{index}].{fact}")
            if _number(value):
                families.setdefault(metric, Family(metric)).add(float(value) * factor, **gpu, **labels)
        for fact, step in SMOKE_STEPS.items():
            value = facts.get(f"smoke[{index}].{fact}")
            if isinstance(value, bool):
                families.setdefault("smoke_step_ok", Family("smoke_step_ok")).add(int(value), **gpu, step=step)
    return families.values()


def _family_text(family: Family) -> str:
    name = f"{PREFIX}_{family.name}"
    lines = [f"# HELP {name} {_escape_help(HELP[family.name])}", f"# TYPE {name} gauge"]
    for labels, value in family.samples:
        inside = ",".join(f'{key}="{escape_label(text)}"' for key, text in labels.items())
        lines.append(f"{name}{{{inside}}} {_value(value)}" if inside else f"{name} {_value(value)}")
    return "\n".join(lines) + "\n"


def escape_label(value: object) -> str:
    """A label value as the exposition format needs it: backslash, double quote and line feed
    escaped; every other control character shown as an escape (``report.printable``), never sent."""
    return printable(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _epoch(created: str | None) -> int | None:
    """``2026-12-02T01:08:13+00:00`` (how reports write their time, always UTC) → Unix seconds."""
    try:
        return calendar.timegm(time.strptime(str(created)[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None

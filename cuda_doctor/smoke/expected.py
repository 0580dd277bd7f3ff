"""Measured smoke figures against the expected ones (``rules/data/gpu_expected.toml``), and the
likely causes of slowness, as ``derived.smoke[i].*``."""

from __future__ import annotations

import re
from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.tables import load_table

#: metric → (figure: the measured fact under smoke[i] and the expected key, achievable factor key)
METRICS: dict[str, tuple[str, str]] = {
    "fp32": ("fp32_tflops", "fp32_matmul"),
    "fp16": ("fp16_tflops", "tensor_matmul"),
    "bf16": ("bf16_tflops", "tensor_matmul"),
    "h2d_pinned": ("h2d_pinned_gbps", "h2d_pinned"),
    "h2d_pageable": ("h2d_pageable_gbps", "h2d_pageable"),
}
MATMULS = ("fp32", "fp16", "bf16")

#: Clock-event reasons that hold clocks down for a reason other than idleness.
SLOWING_REASONS: dict[str, str] = {
    "sw_power_cap": "the power limit was reached (sw_power_cap)",
    "hw_slowdown": "hardware slowdown (hw_slowdown: overheating or power brake)",
    "sw_thermal": "thermal slowdown by the driver (sw_thermal)",
    "hw_thermal": "thermal slowdown by the hardware (hw_thermal)",
    "hw_power_brake": "the external power brake was asserted (hw_power_brake)",
    "applications_clocks": "application clocks are set below the maximum (applications_clocks)",
}
NO_CAUSE = (
    "none visible in the facts (no clock-event reason, PCIe downgrade, power cap or other "
    "process while it ran); compare with `nvidia-smi -q -d PERFORMANCE,POWER` under load"
)


def find_row(table: dict[str, Any], device_name: str) -> dict[str, Any] | None:
    rows = (dict(row) for row in table.get("gpu", []) if re.search(str(row["match"]), device_name, flags=re.IGNORECASE))
    return next(rows, None)


def expected_figures(table: dict[str, Any], row: dict[str, Any]) -> dict[str, float]:
    """The expected figure per key: a measured row as it is, a datasheet row scaled."""
    out: dict[str, float] = {}
    achievable = table.get("achievable", {})
    links = table.get("pcie_gbps", {})
    for key, factor in METRICS.values():
        if key in row:
            out[key] = float(row[key])
        elif f"peak_{key}" in row and factor in achievable:
            out[key] = round(float(row[f"peak_{key}"]) * float(achievable[factor]), 1)
        elif key.startswith("h2d") and str(row.get("pcie_gen")) in links and factor in achievable:
            out[key] = round(float(links[str(row["pcie_gen"])]) * float(achievable[factor]), 1)
    launch = row.get("launch_us", table.get("defaults", {}).get("launch_us"))
    if launch is not None:
        out["launch_us"] = float(launch)
    return out


def derive(facts: Facts) -> None:
    """Never raises; a figure that cannot be compared is left unknown with the reason."""
    indices = facts.indices("smoke")
    if not indices:
        return
    table = load_table("gpu_expected")
    for i in indices:
        _derive_one(facts, table, i)


def _derive_one(facts: Facts, table: dict[str, Any], i: int) -> None:
    out = f"derived.smoke[{i}]"
    facts.set(f"{out}.bf16_not_measured", _bf16_not_measured(facts, i))
    facts.set(f"{out}.slow_causes", slow_causes(facts, i))
    name = facts.get(indexed("smoke", i, "name"))
    row = find_row(table, name) if isinstance(name, str) else None
    if row is None:
        if isinstance(name, str):
            reason = f"no expected figures for {name} in rules/data/gpu_expected.toml"
        else:
            reason = facts.reason(indexed("smoke", i, "name")) or f"the name of GPU {i} is unknown"
        ratios = [f"{out}.{m}_ratio" for m in (*METRICS, "launch")] + [f"{out}.matmul_ratio_min"]
        facts.mark_all_unknown(ratios, reason)
        return
    for key in ("model", "kind", "source"):
        facts.set(f"{out}.expected_{key}", row[key])
    expected = expected_figures(table, row)
    for metric, (key, _factor) in METRICS.items():
        _ratio(facts, f"{out}.{metric}_ratio", indexed("smoke", i, key), expected.get(key), name)
        if key in expected:
            facts.set(f"{out}.expected_{key}", expected[key])
    launch = facts.get(indexed("smoke", i, "launch_us"))
    if isinstance(launch, (int, float)) and launch > 0 and "launch_us" in expected:
        facts.set(f"{out}.launch_ratio", round(expected["launch_us"] / launch, 2))
        facts.set(f"{out}.launch_percent", round(100 * expected["launch_us"] / launch))
        facts.set(f"{out}.expected_launch_us", expected["launch_us"])
    else:
        facts.mark_unknown(f"{out}.launch_ratio", facts.reason(indexed("smoke", i, "launch_us")) or "not measured")
    known = [(facts.get(f"{out}.{m}_ratio"), m) for m in MATMULS if facts.has(f"{out}.{m}_ratio")]
    if known:
        worst, dtype = min(known)
        facts.set(f"{out}.matmul_ratio_min", worst)
        facts.set(f"{out}.matmul_percent_min", round(100 * worst))
        facts.set(f"{out}.slowest_matmul", dtype)
        facts.set(f"{out}.slowest_matmul_tflops", facts.get(indexed("smoke", i, f"{dtype}_tflops")))
        facts.set(f"{out}.slowest_matmul_expected", expected.get(f"{dtype}_tflops"))
    else:
        facts.mark_unknown(f"{out}.matmul_ratio_min", "no matmul figure could be compared")


def _bf16_not_measured(facts: Facts, i: int) -> str:
    """Why bf16 was not measured on smoke[i]: the skip message must name the right cause."""
    if not facts.has(indexed("smoke", i, "error_step")):
        return "the framework-level smoke did not run on this GPU"
    capability = facts.get(indexed("smoke", i, "capability"))
    if facts.get(indexed("smoke", i, "bf16_native")) is False and isinstance(capability, str):
        return f"bf16 is not native on compute capability {capability} (needs 8.0); not measured"
    return "bf16 was not measured on this GPU"


def _figure(measured_name: str) -> str:
    """``smoke[0].fp16_tflops`` → "the fp16 TFLOP/s figure": a reason never shows a fact's name."""
    key = measured_name.rsplit(".", 1)[-1]
    for suffix, unit in (("_tflops", "TFLOP/s"), ("_gbps", "GB/s"), ("_us", "µs")):
        if key.endswith(suffix):
            return f"the {key[: -len(suffix)].replace('_', ' ')} {unit} figure"
    return f"the {key.replace('_', ' ')} figure"


def _ratio(facts: Facts, out: str, measured_name: str, expected: float | None, gpu: str) -> None:
    measured = facts.get(measured_name)
    if not isinstance(measured, (int, float)) or isinstance(measured, bool):
        facts.mark_unknown(out, facts.reason(measured_name) or f"{_figure(measured_name)} was not measured")
    elif not expected:
        facts.mark_unknown(out, f"no expected figure for {_figure(measured_name)} on {gpu}")
    else:
        facts.set(out, round(measured / expected, 2))
        facts.set(out.replace("_ratio", "_percent"), round(100 * measured / expected))


def _nvml_gpu(facts: Facts, i: int) -> int | None:
    """The NVML index of smoke GPU ``i`` (CUDA ordinals and NVML indices may differ)."""
    uuid = facts.get(indexed("smoke", i, "uuid"))
    if not uuid:
        return None
    return next((j for j in facts.indices("gpu") if facts.get(indexed("gpu", j, "uuid")) == uuid), None)


def slow_causes(facts: Facts, i: int) -> list[str]:
    """Likely causes of a slow figure, from readings taken while the GPU worked."""

    def smoke(key: str) -> Any:
        return facts.get(indexed("smoke", i, key))

    causes: list[str] = []
    j = _nvml_gpu(facts, i)
    reasons = smoke("clock_event_reason_names_under_load")
    if not isinstance(reasons, list) and j is not None:
        reasons = facts.get(indexed("gpu", j, "clock_event_reason_names"))
    for reason in reasons if isinstance(reasons, list) else []:
        if reason in SLOWING_REASONS:
            causes.append(f"clocks held down: {SLOWING_REASONS[reason]}")
    gen, width = smoke("pcie_gen_under_load"), smoke("pcie_width_under_load")
    gen_max, width_max = smoke("pcie_gen_max"), smoke("pcie_width_max")
    if all(isinstance(v, int) for v in (gen, width, gen_max, width_max)) and (gen < gen_max or width < width_max):
        causes.append(
            f"PCIe link ran at gen {gen} x{width} during the copy (card and slot allow "
            f"gen {gen_max} x{width_max}): check the slot, riser and BIOS link settings"
        )
    limit, default = smoke("power_limit_w"), smoke("power_default_limit_w")
    if isinstance(limit, (int, float)) and isinstance(default, (int, float)) and limit < 0.9 * default:
        causes.append(f"power limit set to {limit:g} W (default {default:g} W): `nvidia-smi -pl`")
    others = smoke("other_process_count")
    if isinstance(others, int) and others > 0:
        used = smoke("other_process_mib")
        causes.append(f"{others} other process(es) on the GPU" + (f" using {used} MiB" if used else ""))
    temperature = smoke("temperature_c_under_load")
    if isinstance(temperature, int) and temperature >= 85:
        causes.append(f"the GPU reached {temperature} °C while busy")
    if j is not None and facts.get(indexed("gpu", j, "mig_enabled")) is True:
        causes.append("MIG is enabled: the CUDA device is a slice of the GPU")
    return causes or [NO_CAUSE]

"""The GPU's clock-event reasons by name, alike for the GPU probe and the smoke run."""

from __future__ import annotations

#: nvmlClocksEventReason* bits (nvml.h) and the names the facts use for them.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
    0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks",
}  # fmt: skip

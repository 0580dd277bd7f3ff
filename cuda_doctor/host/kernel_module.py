"""The loaded NVIDIA kernel module's version, which every user-space driver library must match (a
driver upgraded without a reboot leaves the old module loaded)."""

from __future__ import annotations

import re

from cuda_doctor.base.reading import read_text
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

PROC_VERSION = "/proc/driver/nvidia/version"
SYS_VERSION = "/sys/module/nvidia/version"
READ_CAP = 4096
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")


def module_version(text: str) -> str | None:
    """The version in the first line of /proc/driver/nvidia/version, or in a bare version file."""
    lines = text.strip().splitlines()
    tokens = lines[0].split() if lines else []
    return next((token for token in tokens if _VERSION.match(token)), None)


class KernelModuleProbe:
    name = "kernel"

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        reasons = []
        for path in (PROC_VERSION, SYS_VERSION):
            try:
                text = read_text(ctx.file(path), READ_CAP, "a kernel module's version file")
            except OSError as exc:  # FileRefused too: a FIFO or a device under another root
                reasons.append(f"{path}: {exc.strerror or exc}")
                continue
            version = module_version(text)
            if version is None:
                first = text.strip().splitlines()[0][:120] if text.strip() else ""
                reasons.append(f"{path} names no version: {first!r}" if first else f"{path} is empty")
                continue
            facts.set("kernel.nvidia_module_version", version)
            facts.set("kernel.nvidia_module_source", path)
            return facts
        reason = "no NVIDIA kernel module is loaded here (" + "; ".join(reasons) + ")"
        facts.mark_all_unknown(("kernel.nvidia_module_version", "kernel.nvidia_module_source"), reason)
        return facts


PROBE = KernelModuleProbe()

"""The loaded NVIDIA kernel module: its version, which every user-space driver library must match
(a driver upgraded without a reboot leaves the old module loaded), and its flavour (open or
proprietary); whether ``nouveau`` is loaded; and the NVIDIA GPUs on the PCI bus with the driver
bound to each, so that a GPU the kernel sees but NVML does not is named."""

from __future__ import annotations

import os
import re
from pathlib import Path

from cuda_doctor.base.reading import read_text
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

PROC_VERSION = "/proc/driver/nvidia/version"
SYS_VERSION = "/sys/module/nvidia/version"
READ_CAP = 4096
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"
#: PCI classes of GPUs: VGA controller (0x0300) and 3D controller (0x0302).
GPU_CLASSES = ("0x0300", "0x0302")
#: The most PCI functions looked at: a machine has a few hundred.
MAX_PCI_FUNCTIONS = 4096


def flavour(text: str) -> str | None:
    """ "open" for "NVIDIA UNIX Open Kernel Module", "proprietary" for "NVIDIA UNIX x86_64 Kernel
    Module" (the first line of /proc/driver/nvidia/version)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "Open Kernel Module" in first:
        return "open"
    return "proprietary" if "Kernel Module" in first else None


def pci_gpus(root: Path) -> list[dict[str, str | None]]:
    """The NVIDIA GPUs on the PCI bus under ``root`` (/sys/bus/pci/devices): address, device id
    and the kernel driver bound to each (None: none)."""
    found: list[dict[str, str | None]] = []
    for name in sorted(os.listdir(root))[:MAX_PCI_FUNCTIONS]:
        device = root / name
        try:
            vendor = read_text(device / "vendor", 64, "a PCI vendor id").strip()
            kind = read_text(device / "class", 64, "a PCI class").strip()
        except OSError:
            continue  # not a device, or one that went away while listed
        if vendor != NVIDIA_VENDOR or not kind.startswith(GPU_CLASSES):
            continue
        try:
            device_id: str | None = read_text(device / "device", 64, "a PCI device id").strip()
        except OSError:
            device_id = None
        driver = device / "driver"
        bound = os.path.basename(os.readlink(driver)) if os.path.islink(driver) else None
        found.append({"address": name, "device": device_id, "driver": bound})
    return found


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
        facts.set("kernel.nouveau_loaded", os.path.isdir(ctx.file("/sys/module/nouveau")))
        try:
            facts.set("kernel.pci_gpus", pci_gpus(ctx.file(PCI_DEVICES)))
        except OSError as exc:
            facts.mark_unknown("kernel.pci_gpus", f"{PCI_DEVICES} could not be listed: {exc.strerror or exc}")
        self._module(ctx, facts)
        return facts

    def _module(self, ctx: ProbeContext, facts: Facts) -> None:
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
            facts.set("kernel.nvidia_module_flavour", flavour(text) if path == PROC_VERSION else None)
            return
        reason = "no NVIDIA kernel module is loaded here (" + "; ".join(reasons) + ")"
        names = ("kernel.nvidia_module_version", "kernel.nvidia_module_source", "kernel.nvidia_module_flavour")
        facts.mark_all_unknown(names, reason)


PROBE = KernelModuleProbe()

"""The loaded NVIDIA kernel module's version, from the lines real machines print."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.host.kernel_module import PROBE, flavour, module_version

OPEN_H200 = (  # read on the H200 machine
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n"
    "GCC version:  gcc version 15.3.0 (GCC) \n"
)
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\n"


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (OPEN_H200, "580.159.04"),
        (PROPRIETARY, "550.90.07"),
        ("580.159.04\n", "580.159.04"),
        ("", None),
        ("NVRM\n", None),
    ],
)
def test_versions_in_the_files_real_drivers_write(text: str, version: str | None) -> None:
    assert module_version(text) == version


def _root(tmp_path: Path, files: dict[str, str]) -> ProbeContext:
    for path, text in files.items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return ProbeContext(root=tmp_path)


def test_proc_first_then_sys(tmp_path: Path) -> None:
    facts = PROBE.collect(_root(tmp_path, {"/proc/driver/nvidia/version": OPEN_H200}))
    assert facts.values == {
        "kernel.nvidia_module_version": "580.159.04",
        "kernel.nvidia_module_source": "/proc/driver/nvidia/version",
        "kernel.nvidia_module_flavour": "open",
        "kernel.nouveau_loaded": False,
    }
    other = tmp_path / "other"
    facts = PROBE.collect(
        _root(other, {"/proc/driver/nvidia/version": "", "/sys/module/nvidia/version": "575.57.08\n"})
    )
    assert facts.values["kernel.nvidia_module_version"] == "575.57.08"


def test_no_module_is_unknown_with_both_reasons(tmp_path: Path) -> None:
    facts = PROBE.collect(ProbeContext(root=tmp_path))
    reason = facts.unknown["kernel.nvidia_module_version"]
    assert reason.startswith("no NVIDIA kernel module is loaded here")
    assert "/proc/driver/nvidia/version" in reason and "/sys/module/nvidia/version" in reason
    assert not PROBE.applies(ProbeContext(fast=True))


def _pci(root: Path, address: str, vendor: str, kind: str, driver: str | None) -> None:
    device = root / "sys/bus/pci/devices" / address
    device.mkdir(parents=True)
    (device / "vendor").write_text(vendor + "\n")
    (device / "class").write_text(kind + "\n")
    (device / "device").write_text("0x2335\n")
    if driver:
        target = root / "sys/bus/pci/drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        (device / "driver").symlink_to(target)


def test_the_flavour_nouveau_and_the_nvidia_gpus_on_the_pci_bus(tmp_path: Path) -> None:
    proc = tmp_path / "proc/driver/nvidia"
    proc.mkdir(parents=True)
    (proc / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  Thu\n"
    )
    (tmp_path / "sys/module/nouveau").mkdir(parents=True)
    _pci(tmp_path, "0000:00:06.0", "0x10de", "0x030200", "nvidia")
    _pci(tmp_path, "0000:2b:00.0", "0x10de", "0x030000", None)
    _pci(tmp_path, "0000:05:00.0", "0x10de", "0x068000", "nvidia-nvswitch")  # an NVSwitch: not a GPU
    _pci(tmp_path, "0000:00:01.0", "0x8086", "0x030000", "i915")
    facts = PROBE.collect(ProbeContext(root=tmp_path))
    assert facts.get("kernel.nvidia_module_flavour") == "open"
    assert facts.get("kernel.nouveau_loaded") is True
    assert facts.get("kernel.pci_gpus") == [
        {"address": "0000:00:06.0", "device": "0x2335", "driver": "nvidia"},
        {"address": "0000:2b:00.0", "device": "0x2335", "driver": None},
    ]


def test_the_proprietary_flavour() -> None:
    assert (
        flavour("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n")
        == "proprietary"
    )
    assert flavour("garbage") is None

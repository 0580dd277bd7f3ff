"""The loaded NVIDIA kernel module's version, from the lines real machines print."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.host.kernel_module import PROBE, module_version

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

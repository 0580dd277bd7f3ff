"""The compile deriver on its own: what it concludes from facts, and the commands it builds."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from cuda_doctor.core.facts import Facts
from cuda_doctor.framework.compile import derive

H200 = Path(__file__).resolve().parents[2] / "rules" / "h200_facts.json"


def h200(**changes: object) -> Facts:
    facts = Facts.from_dict(json.loads(H200.read_text()))
    for name, value in changes.items():
        facts.set(name.replace("__", "."), value)
    return facts


def derived(facts: Facts) -> Facts:
    derive.derive(facts)
    return facts


def test_the_healthy_h200() -> None:
    facts = derived(h200())
    for name, value in {
        "gpus_below_minimum": [],
        "cc_state": "ok",
        "cxx_state": "ok",
        "libcuda_state": "ok",
        "ptxas_too_old": [],
        "ptxas_driver_state": "ok",
        "cache_unusable": [],
        "cache_network": [],
    }.items():
        assert facts.get(f"derived.compile.{name}") == value, name
    assert not any(name.startswith("derived.compile.") and name.endswith("command") for name in facts.values)


def test_which_libcuda_a_triton_links() -> None:
    assert derive.link_of(h200()) == derive.Link("libcuda.so.1", "-l:libcuda.so.1")
    assert derive.link_of(h200(compile__libcuda_libraries=["cuda"])) == derive.Link("libcuda.so", "-lcuda")
    # where the driver module could not be read, the release says it (triton-lang/triton#8668)
    old = h200(compile__triton_version="3.4.0")
    old.values.pop("compile.libcuda_libraries")
    assert derive.link_of(old) == derive.Link("libcuda.so", "-lcuda")
    old.set("compile.triton_version", "3.6.0")
    assert derive.link_of(old).file == "libcuda.so.1"  # type: ignore[union-attr]
    old.set("compile.triton_version", None)
    facts = derived(old)
    assert facts.unknown["derived.compile.libcuda_state"] == "which libcuda file this triton links is not known"


def test_a_hostile_folder_stays_one_word() -> None:
    folder = "/opt/drivers $(touch PWNED)/lib"
    facts = derived(
        h200(
            compile__libcuda_dirs=[],
            compile__libcuda_so1_dirs=[],
            compile__libcuda_so_dirs=[],
            compile__libcuda_candidates=[folder],
        )
    )
    command = str(facts.get("derived.compile.libcuda_command"))
    assert shlex.split(command) == ["export", f"TRITON_LIBCUDA_PATH={folder}"]


def test_each_gpu_meets_its_own_ptxas() -> None:
    """An H200 and a B200: ptxas for the one, ptxas-blackwell (too old here) for the other."""
    facts = h200(compile__ptxas_blackwell_version="12.7")
    facts.set("gpu.count", 2)
    facts.set("gpu[1].compute_capability", "10.0")
    facts.set("gpu[1].name", "NVIDIA B200")
    derived(facts)
    too_old = facts.get("derived.compile.ptxas_too_old")
    assert len(too_old) == 1 and too_old[0].startswith("GPU 1 (NVIDIA B200) needs sm_100a, known from CUDA 12.8")
    assert facts.get("derived.compile.ptxas_targets")[0].startswith("GPU 0 (NVIDIA H200): sm_90a with ptxas 13.0")
    assert (
        facts.get("derived.compile.ptxas_arch_command")
        == "export TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin/ptxas"
    )


def test_no_gpu_and_unknown_gpus() -> None:
    facts = h200(gpu__count=0)
    for name in [n for n in facts.values if n.startswith("gpu[")]:
        facts.values.pop(name)
    derived(facts)
    assert facts.get("derived.compile.gpus_below_minimum") == []
    assert facts.get("derived.compile.ptxas_driver_state") == "ok"  # Triton's ptxas, judged without a GPU
    unknown = h200()
    unknown.values.pop("gpu.count")
    unknown.mark_unknown("gpu.count", "NVML: Driver Not Loaded")
    derived(unknown)
    assert unknown.unknown["derived.compile.gpus_below_minimum"] == "NVML: Driver Not Loaded"
    assert unknown.unknown["derived.compile.ptxas_too_old"] == "NVML: Driver Not Loaded"


def test_a_ptxas_newer_than_the_driver_and_no_toolkit_to_offer() -> None:
    facts = derived(h200(driver__cuda_version="12.4", compile__toolkit_ptxas_path=None))
    assert facts.get("derived.compile.ptxas_driver_state") == "newer_major"
    assert "no CUDA toolkit ptxas was found" in facts.unknown["derived.compile.ptxas_driver_command"]


def test_install_commands_per_family() -> None:
    missing = {"compile__cc": None, "compile__cc_source": None, "compile__cc_on_path": None, "compile__cc_works": False}
    for family, root, command in (
        ("debian", True, "apt-get update && apt-get install -y gcc"),
        ("debian", False, "sudo apt-get update && sudo apt-get install -y gcc"),
        ("rhel", True, "dnf install -y gcc"),
        ("suse", False, "sudo zypper --non-interactive install gcc"),
    ):
        facts = derived(h200(system__os_family=family, system__is_root=root, **missing))
        assert facts.get("derived.compile.cc_command") == command

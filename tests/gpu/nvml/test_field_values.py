"""The per-GPU facts read through batched field values are the facts the per-function calls read:
the same values and the same unknown reasons, whichever fields a driver answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import fields
from cuda_doctor.gpu.nvml.read import collect_nvml

MakeNvml = Callable[..., Any]
#: Every field the probe asks: a driver that predates them all answers each through its function
#: (the recovery action has none, so it is left out of the comparisons).
ANSWERED_BY_FUNCTIONS = frozenset(set(fields.GPU_BATCH) | set(fields.LINK_FIELDS))
RECOVERY_FACTS = ("recovery_action", "recovery_action_label")
#: The per-function calls the first batch stands for.
REPLACED = (
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkErrorCounter",
)

EIGHT_GPUS: dict[str, Any] = {
    "device_count": 8,
    "per_gpu": {3: {"uncorrected": 2, "remapped_rows": (0, 1, 1, 0)}, 6: {"ecc": [0, 1]}},
    "nvlinks_down": frozenset({(5, 4), (5, 9)}),
    "nvlink_errors": {(2, 7): {"replay": 3, "crc_flit": 40, "crc_data": 2}, (5, 4): {"recovery": 1}},
    "fabric": {i: (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, pynvml.NVML_SUCCESS) for i in range(8)},
}
CASES = {
    "one H200": {},
    "8 GPUs, each its own readings": EIGHT_GPUS,
    "functions failing or not supported": {
        "errors": {
            "nvmlDeviceGetTotalEccErrors": pynvml.NVML_ERROR_GPU_IS_LOST,
            "nvmlDeviceGetEccMode": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetRemappedRows": pynvml.NVML_ERROR_NO_PERMISSION,
        }
    },
    "a PCIe board": {"nvlinks": 0},
    "no NVLink counters (NVLink 5)": {"nvlink_counters_supported": False},
    "NVLink counters failing": {"errors": {"nvmlDeviceGetNvLinkErrorCounter": pynvml.NVML_ERROR_UNKNOWN}},
    "NVLink states failing": {"errors": {"nvmlDeviceGetNvLinkState": pynvml.NVML_ERROR_GPU_IS_LOST}},
}


def _per_gpu(calls: list[str], gpus: int) -> dict[str, float]:
    """Driver calls per GPU, by function (the system-wide ones left out)."""
    system = {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount"}
    counted: dict[str, float] = {}
    for name in calls:
        if not name.startswith("nvmlSystem") and name not in system:
            counted[name] = counted.get(name, 0) + 1 / gpus
    return counted


def _both_ways(make_nvml: MakeNvml, ctx: ProbeContext, options: dict[str, Any]) -> tuple[Facts, Facts, Any, Any]:
    batched = make_nvml(**options)
    one_by_one = make_nvml(unsupported_fields=ANSWERED_BY_FUNCTIONS, **options)  # a driver before these fields
    return collect_nvml(ctx, batched.module()), collect_nvml(ctx, one_by_one.module()), batched, one_by_one


@pytest.mark.parametrize("options", list(CASES.values()), ids=list(CASES))
def test_field_values_and_functions_read_the_same_facts(
    make_nvml: MakeNvml, ctx: ProbeContext, options: dict[str, Any]
) -> None:
    batched, one_by_one, _, _ = _both_ways(make_nvml, ctx, options)
    assert _without_recovery(batched.values) == _without_recovery(one_by_one.values)
    assert _without_recovery(batched.unknown) == _without_recovery(one_by_one.unknown)


def _without_recovery(named: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in named.items() if not name.endswith(RECOVERY_FACTS)}


def test_the_eight_gpus_readings_are_their_own(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    facts, _, _, _ = _both_ways(make_nvml, ctx, EIGHT_GPUS)
    assert facts.get("gpu[3].ecc_uncorrected_volatile") == 2
    assert facts.get("gpu[3].remapped_rows_pending") is True and facts.get("gpu[0].remapped_rows_pending") is False
    assert facts.get("gpu[6].ecc_enabled") is False
    states = facts.get("gpu[5].nvlink_states")
    assert isinstance(states, list) and states.count("inactive") == 2 and states[4] == states[9] == "inactive"
    assert facts.get("gpu[2].nvlink_errors") == {"7": {"replay": 3, "recovery": 0, "crc": 42}}
    assert facts.get("gpu[5].nvlink_errors") == {"4": {"replay": 0, "recovery": 1, "crc": 0}}
    assert facts.get("gpu[7].fabric_state") == "completed" and facts.get("gpu[7].fabric_status") == "success"
    assert len({facts.get(f"gpu[{i}].pci_bus_id") for i in range(8)}) == 8


def test_the_batch_replaces_the_per_function_calls(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    _, _, batched, one_by_one = _both_ways(make_nvml, ctx, EIGHT_GPUS)
    now, before = _per_gpu(batched.calls, 8), _per_gpu(one_by_one.calls, 8)
    assert now["nvmlDeviceGetFieldValues"] == 2  # memory health and the link count; then the links
    assert not set(REPLACED) & set(now)
    assert before["nvmlDeviceGetNvLinkState"] >= 18 and before["nvmlDeviceGetNvLinkErrorCounter"] >= 18 * 4
    assert sum(now.values()) < sum(before.values())


def test_a_field_an_older_driver_does_not_know_is_asked_through_its_function(
    make_nvml: MakeNvml, ctx: ProbeContext
) -> None:
    # a driver that knows the ECC fields (1, 4) but not row remapping's (144, 145) nor the recovery action's (230)
    newer = frozenset({fields.REMAPPED_PENDING, fields.REMAPPED_FAILURE, fields.GPU_RECOVERY_ACTION})
    fake = make_nvml(unsupported_fields=newer, nvlinks=0)
    facts = collect_nvml(ctx, fake.module())
    assert fake.calls.count("nvmlDeviceGetRemappedRows") == 1  # the pair, through the one function
    assert (facts.get("gpu[0].remapped_rows_pending"), facts.get("gpu[0].remapped_rows_failure")) == (False, False)
    assert "nvmlDeviceGetTotalEccErrors" not in fake.calls  # the other fields were answered


def test_a_field_the_gpu_lacks_is_null_without_asking_its_function(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    # the H200 keeps no retired-pages flag: field 31 answers NOT_SUPPORTED while field 230 is answered
    fake = make_nvml(nvlink_counters_supported=False)
    facts = collect_nvml(ctx, fake.module())
    assert facts.has("gpu[0].retired_pages_pending") and facts.get("gpu[0].retired_pages_pending") is None
    assert "nvmlDeviceGetRetiredPagesPendingStatus" not in fake.calls
    assert facts.get("gpu[0].nvlink_errors") is None  # counters this GPU does not keep (NVLink 5)
    assert "nvmlDeviceGetNvLinkErrorCounter" not in fake.calls
    assert facts.get("gpu[0].nvlink_states") == ["active"] * 18


def test_a_failing_batch_falls_back_to_every_function(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(errors={"nvmlDeviceGetFieldValues": pynvml.NVML_ERROR_GPU_IS_LOST})
    facts = collect_nvml(ctx, fake.module())
    assert facts.get("gpu[0].ecc_uncorrected_volatile") == 0
    assert facts.get("gpu[0].nvlink_count") == 18  # counted link by link
    assert facts.get("gpu[0].nvlink_states") == ["active"] * 18
    assert "GPU is lost" in facts.unknown["gpu[0].recovery_action"]  # no function to ask instead


def test_the_fast_check_leaves_the_pcie_link_unasked(make_nvml: MakeNvml, tmp_path: Path) -> None:
    fake = make_nvml()
    facts = collect_nvml(ProbeContext(root=tmp_path, env={"PATH": ""}, fast=True), fake.module())
    assert not any("Pcie" in name for name in fake.calls)
    assert "not read by the fast check" in facts.unknown["gpu[0].pcie_gen_max"]
    assert facts.get("gpu[0].ecc_enabled") is True  # what its rules read is read


#: What the fast check asks of each GPU, one driver round trip each: 15 calls, and the two
#: field-values batches (memory health with the NVLink count; the links).  The full check adds
#: the PCIe link (four calls).
FAST_CALLS_PER_GPU = {
    "nvmlDeviceGetHandleByIndex": 1,
    "nvmlDeviceGetName": 1,
    "nvmlDeviceGetUUID": 1,
    "nvmlDeviceGetBrand": 1,
    "nvmlDeviceGetPciInfo": 1,
    "nvmlDeviceGetCudaComputeCapability": 1,
    "nvmlDeviceGetMemoryInfo": 1,
    "nvmlDeviceGetFieldValues": 2,
    "nvmlDeviceGetPersistenceMode": 1,
    "nvmlDeviceGetMigMode": 1,
    "nvmlDeviceGetCurrentClocksEventReasons": 1,
    "nvmlDeviceGetTemperature": 1,
    "nvmlDeviceGetPowerUsage": 1,
    "nvmlDeviceGetEnforcedPowerLimit": 1,
    "nvmlDeviceGetComputeRunningProcesses": 1,
    "nvmlDeviceGetGpuFabricInfoV": 1,
}


@pytest.mark.parametrize(("links", "most"), [(18, 17), (0, 16)])
def test_the_fast_check_makes_at_most_so_many_driver_calls_per_gpu(
    make_nvml: MakeNvml, tmp_path: Path, links: int, most: int
) -> None:
    fake = make_nvml(device_count=8, nvlinks=links, fabric=EIGHT_GPUS["fabric"])
    facts = collect_nvml(ProbeContext(root=tmp_path, env={"PATH": ""}, fast=True, timeout=10.0), fake.module())
    per_gpu = _per_gpu(fake.calls, 8)
    expected = dict(FAST_CALLS_PER_GPU, nvmlDeviceGetFieldValues=2 if links else 1)
    assert per_gpu == expected
    assert sum(per_gpu.values()) <= most
    assert facts.get("gpu[7].nvlink_count") == links and facts.get("gpu[7].fabric_state") == "completed"

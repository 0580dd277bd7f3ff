"""The NVSwitch fabric and NVLink facts read from the fake NVML."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml
import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import fields
from cuda_doctor.gpu.nvml.read import collect_nvml

MakeNvml = Callable[..., Any]
#: Every field the probe asks.
PROBE_FIELDS = frozenset(set(fields.GPU_BATCH) | set(fields.LINK_FIELDS))


def fields_from(first: int) -> frozenset[int]:
    """The fields a driver that predates field ``first`` does not know: it and every newer one."""
    return frozenset(f for f in PROBE_FIELDS if f >= first)


@pytest.mark.parametrize(
    ("state", "status", "fact_state", "fact_status"),
    [
        (pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, "not_supported", None),
        (pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED, 0, "not_started", None),
        (pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS, 0, "in_progress", None),
        (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0, "completed", "success"),
        (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, pynvml.NVML_ERROR_TIMEOUT, "completed", "Timeout (10)"),
        (7, 0, "other", None),
    ],
)
def test_fabric_state_and_status(
    make_nvml: MakeNvml, ctx: ProbeContext, state: int, status: int, fact_state: str, fact_status: str | None
) -> None:
    facts = collect_nvml(ctx, make_nvml(fabric={0: (state, status)}, nvlinks=0).module())
    assert facts.get("gpu[0].fabric_state") == fact_state
    assert facts.get("gpu[0].fabric_status") == fact_status


def test_fabric_through_the_first_call_when_the_versioned_one_is_missing(
    make_nvml: MakeNvml, ctx: ProbeContext
) -> None:
    completed = {0: (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0)}
    for options in (
        {"missing": {"nvmlDeviceGetGpuFabricInfoV"}},  # an older nvidia-ml-py
        {"errors": {"nvmlDeviceGetGpuFabricInfoV": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}},  # an older driver
    ):
        fake = make_nvml(fabric=completed, nvlinks=0, **options)
        assert collect_nvml(ctx, fake.module()).get("gpu[0].fabric_state") == "completed"
        assert "nvmlDeviceGetGpuFabricInfo" in fake.calls


def test_fabric_not_reported_is_null_and_a_failure_is_a_reason(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    older = make_nvml(errors={"nvmlDeviceGetGpuFabricInfoV": pynvml.NVML_ERROR_NOT_SUPPORTED}, nvlinks=0)
    facts = collect_nvml(ctx, older.module())
    assert facts.has("gpu[0].fabric_state") and facts.get("gpu[0].fabric_state") is None
    lost = make_nvml(errors={"nvmlDeviceGetGpuFabricInfoV": pynvml.NVML_ERROR_GPU_IS_LOST}, nvlinks=0)
    facts = collect_nvml(ctx, lost.module())
    assert (
        "fabric state could not be read: NVML nvmlDeviceGetGpuFabricInfoV: GPU is lost"
        in (facts.unknown["gpu[0].fabric_state"])
    )
    bare = make_nvml(missing={"nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"}, nvlinks=0)
    assert "has no nvmlDeviceGetGpuFabricInfo" in collect_nvml(ctx, bare.module()).unknown["gpu[0].fabric_status"]


def test_a_pcie_board_has_no_nvlink_and_is_not_asked_about_links(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(nvlinks=0)
    facts = collect_nvml(ctx, fake.module())
    assert (facts.get("gpu[0].nvlink_count"), facts.get("gpu[0].nvlink_states"), facts.get("gpu[0].nvlink_errors")) == (
        0,
        [],
        {},
    )
    assert fake.calls.count("nvmlDeviceGetFieldValues") == 1


def test_links_down_and_counters(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(
        device_count=2,
        nvlinks_down=frozenset({(1, 17)}),
        nvlink_errors={(1, 3): {"replay": 1200, "recovery": 2, "crc_flit": 7, "crc_data": 1}},
    )
    facts = collect_nvml(ctx, fake.module())
    assert facts.get("gpu[0].nvlink_states") == ["active"] * 18
    assert facts.get("gpu[1].nvlink_states") == ["active"] * 17 + ["inactive"]
    assert facts.get("gpu[0].nvlink_errors") == {}
    assert facts.get("gpu[1].nvlink_errors") == {"3": {"replay": 1200, "recovery": 2, "crc": 8}}


def test_field_link_states_the_function_cannot_tell(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    sleeping = {fields.NVLINK_STATE: (pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, pynvml.NVML_NVLINK_STATE_SLEEP)}
    facts = collect_nvml(ctx, make_nvml(field_values=sleeping, nvlinks=2).module())
    assert facts.get("gpu[0].nvlink_states") == ["sleep", "sleep"]


def test_nvlink_5_counters_are_null_and_asked_once(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    newer = make_nvml(nvlink_counters_supported=False)  # the driver answers field 230: the GPU lacks them
    facts = collect_nvml(ctx, newer.module())
    assert facts.has("gpu[0].nvlink_errors") and facts.get("gpu[0].nvlink_errors") is None
    assert newer.calls.count("nvmlDeviceGetNvLinkErrorCounter") == 0
    older = make_nvml(nvlink_counters_supported=False, unsupported_fields=fields_from(fields.NVLINK_REPLAY))
    facts = collect_nvml(ctx, older.module())
    assert facts.has("gpu[0].nvlink_errors") and facts.get("gpu[0].nvlink_errors") is None
    assert older.calls.count("nvmlDeviceGetNvLinkErrorCounter") == 3  # one per counter kind, on link 0 only
    assert facts.get("gpu[0].nvlink_states") == ["active"] * 18


def test_an_older_driver_counts_links_by_asking_each(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(unsupported_fields=fields_from(fields.NVLINK_LINK_COUNT))
    facts = collect_nvml(ctx, fake.module())
    assert facts.get("gpu[0].nvlink_count") == 18
    assert fake.calls.count("nvmlDeviceGetNvLinkState") == 19  # links 0-17, and 18 that is not there
    assert facts.get("gpu[0].nvlink_states") == ["active"] * 18


def test_links_that_cannot_be_read_are_unknown_with_the_reason(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(
        unsupported_fields=fields_from(fields.NVLINK_LINK_COUNT),
        errors={"nvmlDeviceGetNvLinkState": pynvml.NVML_ERROR_GPU_IS_LOST},
    )
    facts = collect_nvml(ctx, fake.module())
    for name in ("nvlink_count", "nvlink_states", "nvlink_errors"):
        assert facts.unknown[f"gpu[0].{name}"] == (
            "the GPU's NVLinks could not be counted: NVML nvmlDeviceGetNvLinkState: GPU is lost"
        )


def test_a_gpu_whose_driver_knows_the_link_count_but_says_not_supported_has_no_nvlink(
    make_nvml: MakeNvml, ctx: ProbeContext
) -> None:
    # the recorded H200 alone in its machine: NVLink state NOT_SUPPORTED (nvml.txt); field 230 answered
    fake = make_nvml(unsupported_fields=frozenset({fields.NVLINK_LINK_COUNT}), nvlinks=0)
    facts = collect_nvml(ctx, fake.module())
    assert (facts.get("gpu[0].nvlink_count"), facts.get("gpu[0].nvlink_states")) == (0, [])
    assert "nvmlDeviceGetNvLinkState" not in fake.calls

"""The driver and GPU facts read from a fake ``pynvml`` answering with a real H200's readings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml.binding import VERSION_MISMATCH_MESSAGE
from cuda_doctor.gpu.nvml.gpu_facts import GPU_FIELDS, cuda_version_text, reason_names
from cuda_doctor.gpu.nvml.read import collect_nvml
from tests.gpu.nvml.reading import read_and_close

MakeNvml = Callable[..., Any]


def test_h200_readings(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml()
    facts = read_and_close(ctx, fake.module())
    assert facts.get("driver.source") == "nvml"
    assert facts.get("driver.status") == "ok"
    assert facts.get("driver.error") is None
    assert facts.get("nvml.error") is None
    assert facts.get("driver.version") == "580.159.04"
    assert facts.get("driver.cuda_version") == "13.0"
    assert facts.get("nvml.version") == "13.580.159.04"
    assert facts.get("gpu.count") == 1
    assert facts.indices("gpu") == [0]
    expected = {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": "GPU-3d95cf99-d22a-5850-a342-8583fdfbb084",
        "brand": "nvidia",
        "pci_bus_id": "00000000:00:06.0",
        "compute_capability": "9.0",
        "memory_total_mib": 143771,  # what nvidia-smi and query-gpu.csv print
        "memory_used_mib": 0,  # v2 leaves out the 615 MiB the driver reserves, as nvidia-smi
        "ecc_enabled": True,
        "ecc_uncorrected_volatile": 0,
        "retired_pages_pending": None,  # NOT_SUPPORTED: null, not an error
        "remapped_rows_pending": False,
        "remapped_rows_failure": False,
        "recovery_action": "none",  # NVML field 230 = 0, as nvidia-smi -q prints ("None")
        "recovery_action_label": "none (0)",
        "persistence_mode": True,
        "mig_enabled": False,
        "mig_pending": False,
        "pcie_gen_current": 5,
        "pcie_gen_max": 5,
        "pcie_width_current": 16,
        "pcie_width_max": 16,
        "clock_event_reasons": 1,
        "clock_event_reason_names": ["gpu_idle"],
        "temperature_c": 36,
        "power_w": 77.965,
        "power_limit_w": 700.0,
        "processes": [],
        "process_count": 0,
        "fabric_state": "not_supported",  # nvidia-smi -q prints Fabric State N/A on that machine
        "fabric_status": None,
        "nvlink_count": 18,  # the H200 pair's links (tests/nccl/fixtures/h200x2/nvml-nvlink.txt)
        "nvlink_states": ["active"] * 18,
        "nvlink_errors": {},
    }
    assert set(expected) == set(GPU_FIELDS)
    assert facts.with_prefix("gpu[0]") == expected
    assert facts.unknown == {}
    assert fake.shutdowns == 1
    # the non-deprecated entry points are the ones used
    assert "nvmlSystemGetCudaDriverVersion_v2" in fake.calls
    assert "nvmlSystemGetCudaDriverVersion" not in fake.calls
    assert "nvmlDeviceGetCurrentClocksEventReasons" in fake.calls
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" not in fake.calls


def test_older_bindings_return_bytes(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    facts = collect_nvml(ctx, make_nvml(as_bytes=True).module())
    assert facts.get("driver.version") == "580.159.04"
    assert facts.get("nvml.version") == "13.580.159.04"
    assert facts.get("gpu[0].name") == "NVIDIA H200"
    assert facts.get("gpu[0].uuid") == "GPU-3d95cf99-d22a-5850-a342-8583fdfbb084"
    assert facts.get("gpu[0].pci_bus_id") == "00000000:00:06.0"


def test_older_entry_points_are_used_when_newer_ones_are_missing(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(missing={"nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetCurrentClocksEventReasons"})
    facts = collect_nvml(ctx, fake.module())
    assert facts.get("driver.cuda_version") == "13.0"
    assert facts.get("gpu[0].clock_event_reason_names") == ["gpu_idle"]
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls


@pytest.mark.parametrize(
    "options",
    [
        {"missing": {"nvmlMemory_v2"}},  # nvidia-ml-py without the v2 struct
        {"memory_v2_error": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND},  # driver without v2
    ],
)
def test_memory_info_v1_when_v2_is_unavailable(make_nvml: MakeNvml, ctx: ProbeContext, options: dict[str, Any]) -> None:
    facts = collect_nvml(ctx, make_nvml(**options).module())
    assert facts.get("gpu[0].memory_total_mib") == 143771
    assert facts.get("gpu[0].memory_used_mib") == 615  # v1 counts the driver's reservation


def test_driver_without_the_v2_function_falls_back(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(errors={"nvmlSystemGetCudaDriverVersion_v2": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
    facts = collect_nvml(ctx, fake.module())
    assert facts.get("driver.cuda_version") == "13.0"
    assert "nvmlSystemGetCudaDriverVersion" in fake.calls


def test_not_supported_is_null_and_other_errors_are_reasons(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(
        errors={
            "nvmlDeviceGetEccMode": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetMigMode": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetRemappedRows": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetTemperature": pynvml.NVML_ERROR_GPU_IS_LOST,
            "nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_NO_PERMISSION,
            "nvmlDeviceGetCurrentClocksEventReasons": pynvml.NVML_ERROR_UNKNOWN,
        },
        raises={"nvmlDeviceGetComputeRunningProcesses": TypeError("bad struct")},
    )
    facts = read_and_close(ctx, fake.module())
    assert facts.get("driver.status") == "ok"
    for name in ("ecc_enabled", "power_w", "remapped_rows_pending", "remapped_rows_failure"):
        assert facts.has(f"gpu[0].{name}") and facts.get(f"gpu[0].{name}") is None, name
    # a board without MIG support certainly does not run MIG
    assert facts.get("gpu[0].mig_enabled") is False
    assert facts.unknown["gpu[0].temperature_c"] == "NVML nvmlDeviceGetTemperature: GPU is lost"
    for name in ("memory_total_mib", "memory_used_mib"):
        assert facts.unknown[f"gpu[0].{name}"] == ("NVML nvmlDeviceGetMemoryInfo: Insufficient Permissions")
    for name in ("clock_event_reasons", "clock_event_reason_names"):
        assert "Unknown Error" in facts.unknown[f"gpu[0].{name}"]
    for name in ("processes", "process_count"):
        assert "TypeError: bad struct" in facts.unknown[f"gpu[0].{name}"]
    # the rest was still read
    assert facts.get("gpu[0].compute_capability") == "9.0"
    assert facts.get("gpu[0].power_limit_w") == 700.0
    assert fake.shutdowns == 1


def test_a_gpu_that_cannot_be_opened(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(device_count=2, handle_errors={1: pynvml.NVML_ERROR_GPU_IS_LOST})
    facts = collect_nvml(ctx, fake.module())
    assert facts.get("gpu.count") == 2
    assert facts.indices("gpu") == [0, 1]
    assert facts.get("gpu[0].name") == "NVIDIA H200"
    assert facts.reason("gpu[1].name") == "NVML could not open GPU 1: GPU is lost"


@pytest.mark.parametrize(
    ("code", "status", "message"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found", "libnvidia-ml.so.1 not found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "not_loaded", "Driver Not Loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version_mismatch", VERSION_MISMATCH_MESSAGE),
        (pynvml.NVML_ERROR_NO_PERMISSION, "error", "Failed to initialize NVML: Insufficient"),
        (pynvml.NVML_ERROR_UNKNOWN, "error", "Failed to initialize NVML: Unknown Error"),
    ],
)
def test_init_errors(make_nvml: MakeNvml, ctx: ProbeContext, code: int, status: str, message: str) -> None:
    fake = make_nvml(init_error=code)
    facts = read_and_close(ctx, fake.module())
    assert facts.get("driver.status") == status
    assert message in facts.get("driver.error")
    assert facts.get("nvml.error") == facts.get("driver.error")
    for name in ("driver.version", "driver.cuda_version", "nvml.version", "gpu.count"):
        assert facts.unknown[name] == facts.get("driver.error")
    assert facts.reason("gpu[0].name") == facts.get("driver.error")
    assert fake.shutdowns == 0  # nothing to shut down when init failed


def test_no_gpu(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(device_count=0)
    facts = read_and_close(ctx, fake.module())
    assert facts.get("driver.status") == "no_gpu"
    assert facts.get("gpu.count") == 0
    assert facts.get("driver.version") == "580.159.04"
    assert facts.indices("gpu") == []
    assert fake.shutdowns == 1


def test_process_names_come_from_the_inspected_root(make_nvml: MakeNvml, tmp_path: Path) -> None:
    (tmp_path / "proc" / "4242").mkdir(parents=True)
    (tmp_path / "proc" / "4242" / "comm").write_text("python3\n")
    fake = make_nvml()
    fake.readings["processes"] = [
        SimpleNamespace(pid=4242, usedGpuMemory=1024 * 1024 * 1024),
        SimpleNamespace(pid=77, usedGpuMemory=None),  # not in this PID namespace; WDDM-style None
    ]
    facts = collect_nvml(ProbeContext(root=tmp_path), fake.module())
    assert facts.get("gpu[0].processes") == [
        {"pid": 4242, "name": "python3", "used_mib": 1024.0},
        {"pid": 77, "name": None, "used_mib": None},
    ]
    assert facts.get("gpu[0].process_count") == 2


def test_helpers() -> None:
    assert cuda_version_text(13000) == "13.0"
    assert cuda_version_text(12040) == "12.4"
    assert cuda_version_text(11080) == "11.8"
    assert reason_names(0) == []
    assert reason_names(0x1 | 0x4 | 0x80) == ["gpu_idle", "sw_power_cap", "hw_power_brake"]
    assert reason_names(0x200) == ["bit_0x200"]


@pytest.mark.parametrize(
    ("code", "action"),
    [(0, "none"), (1, "gpu_reset"), (2, "node_reboot"), (3, "drain_p2p"), (4, "drain_and_reset"), (7, "other")],
)
def test_the_recovery_action_is_one_field_value(make_nvml: MakeNvml, ctx: ProbeContext, code: int, action: str) -> None:
    fake = make_nvml(field_values={230: (pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, code)}, nvlinks=0)
    facts = collect_nvml(ctx, fake.module())
    assert facts.get("gpu[0].recovery_action") == action
    assert str(code) in str(facts.get("gpu[0].recovery_action_label"))
    assert fake.calls.count("nvmlDeviceGetFieldValues") == 1  # one round trip for a GPU without NVLink


def test_a_driver_without_the_recovery_action_leaves_it_unknown_never_none(
    make_nvml: MakeNvml, ctx: ProbeContext
) -> None:
    facts = collect_nvml(ctx, make_nvml({"fields": {}}).module())  # NVML answers NOT_SUPPORTED
    assert not facts.has("gpu[0].recovery_action")
    assert "does not report a GPU recovery action" in facts.unknown["gpu[0].recovery_action"]
    failing = make_nvml(errors={"nvmlDeviceGetFieldValues": pynvml.NVML_ERROR_GPU_IS_LOST})
    facts = collect_nvml(ctx, failing.module())
    assert "GPU is lost" in facts.unknown["gpu[0].recovery_action"]


@pytest.mark.parametrize(("mode", "enabled", "pending"), [([0, 1], False, True), ([1, 0], True, False)])
def test_a_pending_mig_mode_change(
    make_nvml: MakeNvml, ctx: ProbeContext, mode: list[int], enabled: bool, pending: bool
) -> None:
    facts = collect_nvml(ctx, make_nvml({"mig": mode}).module())
    assert (facts.get("gpu[0].mig_enabled"), facts.get("gpu[0].mig_pending")) == (enabled, pending)

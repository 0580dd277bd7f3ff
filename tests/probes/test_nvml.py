"""The NVML probe against a fake ``pynvml`` answering with a real H200's readings."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from cuda_doctor.facts import Facts
from cuda_doctor.probes import nvml as nvml_probe
from cuda_doctor.probes.base import ProbeContext
from cuda_doctor.probes.nvml import (
    GPU_FIELDS,
    VERSION_MISMATCH_MESSAGE,
    NvmlRead,
    collect_nvml,
    cuda_version_text,
    prefetch,
    reason_names,
    take_prefetched,
)

MakeNvml = Callable[..., Any]


def read_and_close(ctx: ProbeContext, module: Any) -> Facts:
    """What collect_nvml reads, waited on until NVML is shut down (which follows the hand-over)."""
    read = NvmlRead(ctx, module).start()
    facts = read.facts(ctx.timeout)
    assert read.closed.wait(10)
    return facts


@pytest.fixture
def ctx(tmp_path: Path) -> ProbeContext:
    return ProbeContext(root=tmp_path, env={"PATH": ""}, timeout=10.0)


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
        "persistence_mode": True,
        "mig_enabled": False,
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


def test_loader_oserror_means_library_not_found(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    error = OSError("libnvidia-ml.so.1: cannot open shared object file")
    facts = collect_nvml(ctx, make_nvml(init_exception=error).module())
    assert facts.get("driver.status") == "library_not_found"
    assert "cannot open shared object file" in facts.get("driver.error")


def test_missing_binding_means_library_not_found(ctx: ProbeContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    facts = collect_nvml(ctx)
    assert facts.get("driver.status") == "library_not_found"
    assert "nvidia-ml-py (module pynvml) cannot be imported" in facts.get("driver.error")


def test_no_gpu(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(device_count=0)
    facts = read_and_close(ctx, fake.module())
    assert facts.get("driver.status") == "no_gpu"
    assert facts.get("gpu.count") == 0
    assert facts.get("driver.version") == "580.159.04"
    assert facts.indices("gpu") == []
    assert fake.shutdowns == 1


def test_a_hung_init_is_abandoned(make_nvml: MakeNvml, tmp_path: Path) -> None:
    fake = make_nvml(hang=threading.Event())
    facts = collect_nvml(ProbeContext(root=tmp_path, timeout=0.5), fake.module())
    assert facts.get("driver.status") == "error"
    assert facts.get("driver.error") == "NVML did not answer in 0.5 s"
    assert facts.unknown["driver.version"] == "NVML did not answer in 0.5 s"
    assert fake.shutdowns == 0


def test_a_hang_after_init_still_shuts_down(make_nvml: MakeNvml, tmp_path: Path) -> None:
    release = threading.Event()
    fake = make_nvml(hang=release, hang_in="nvmlDeviceGetCount")
    facts = collect_nvml(ProbeContext(root=tmp_path, timeout=0.5), fake.module())
    assert facts.get("driver.error") == "NVML did not answer in 0.5 s"
    assert "gpu.count" not in facts
    release.set()  # the abandoned worker finishes and must close NVML
    deadline = time.monotonic() + 10
    while fake.shutdowns == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
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


def test_facts_are_handed_over_before_nvml_is_shut_down(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    release = threading.Event()
    fake = make_nvml(hang=release, hang_in="nvmlShutdown")
    facts = collect_nvml(ctx, fake.module())  # returns although nvmlShutdown has not returned
    assert facts.get("driver.status") == "ok"
    assert facts.get("gpu[0].name") == "NVIDIA H200"
    assert fake.shutdowns == 0
    release.set()
    deadline = time.monotonic() + 10
    while fake.shutdowns == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.shutdowns == 1


def test_a_failed_shutdown_is_kept_for_debugging(
    make_nvml: MakeNvml, ctx: ProbeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: list[str] = []
    monkeypatch.setattr(nvml_probe, "shutdown_errors", errors)
    facts = read_and_close(ctx, make_nvml(errors={"nvmlShutdown": pynvml.NVML_ERROR_UNKNOWN}).module())
    assert facts.get("driver.status") == "ok"  # the readings stand
    assert errors == ["Unknown Error"]


def test_a_prefetched_read_is_taken_over_once(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    fake = make_nvml(device_count=2)
    prefetch(ctx, fake.module())
    facts = collect_nvml(ctx)  # no module given: the probe of a real run
    assert facts.get("gpu.count") == 2
    assert facts.get("gpu[1].name") == "NVIDIA H200"
    assert fake.calls.count("nvmlInit") == 1
    assert take_prefetched(ctx) is None  # a second probe reads afresh


def test_a_read_prefetched_for_another_file_system_is_not_used(make_nvml: MakeNvml, tmp_path: Path) -> None:
    fake = make_nvml()
    read = prefetch(ProbeContext(root=tmp_path / "host"), fake.module())
    assert take_prefetched(ProbeContext(root=tmp_path / "fixture")) is None
    assert take_prefetched(ProbeContext(root=tmp_path / "host")) is None  # discarded, not kept
    assert read.closed.wait(10) and fake.shutdowns == 1  # it still ends on its own


#: The questions asked of each GPU ahead of pynvml, with their arguments after the handle.
EARLY_ASKS = {
    "nvmlDeviceGetTotalEccErrors": (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC, "out"),
    "nvmlDeviceGetEccMode": ("out", "out"),
    "nvmlDeviceGetPowerUsage": ("out",),
    "nvmlDeviceGetCurrentClocksEventReasons": ("out",),
}


class FakeLibrary:
    """libnvidia-ml.so.1 as ctypes sees it: functions taking pointers, returning NVML codes."""

    def __init__(self, gpus: int = 2, init_code: int = 0, missing: str | None = None) -> None:
        self.gpus = gpus
        self.init_code = init_code
        self.missing = missing  # a function this (older) library lacks
        self.calls: list[tuple[str, int | None]] = []

    def nvmlInit_v2(self) -> int:
        self.calls.append(("nvmlInit_v2", None))
        return self.init_code

    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        count.contents.value = self.gpus
        self.calls.append(("nvmlDeviceGetCount_v2", None))
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, handle: Any) -> int:
        handle.contents.value = 1000 + index
        self.calls.append(("nvmlDeviceGetHandleByIndex_v2", index))
        return 0

    def __getattr__(self, name: str) -> Any:
        if name not in EARLY_ASKS or name == self.missing:
            raise AttributeError(f"undefined symbol: {name}")

        def ask(handle: Any, *args: Any) -> int:
            expected = EARLY_ASKS[name]
            for arg, want in zip(args, expected, strict=True):
                assert hasattr(arg, "contents") if want == "out" else arg == want  # outputs are pointers
            self.calls.append((name, handle.value))
            return 0

        return ask


def ask_early(library: FakeLibrary) -> None:
    opened: list[str] = []

    def load(name: str) -> FakeLibrary:
        opened.append(name)
        return library

    nvml_probe.open_driver_early(load).join(10)
    assert opened == ["libnvidia-ml.so.1"]


def test_the_slow_first_asks_are_made_for_every_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_probe, "early_errors", [])
    library = FakeLibrary(gpus=2)
    ask_early(library)
    per_gpu = list(EARLY_ASKS)
    assert library.calls == [
        ("nvmlInit_v2", None),
        ("nvmlDeviceGetCount_v2", None),
        ("nvmlDeviceGetHandleByIndex_v2", 0),
        *[(name, 1000) for name in per_gpu],
        ("nvmlDeviceGetHandleByIndex_v2", 1),
        *[(name, 1001) for name in per_gpu],
    ]
    assert nvml_probe.early_errors == []


def test_nothing_more_is_asked_when_init_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_probe, "early_errors", [])
    library = FakeLibrary(init_code=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    ask_early(library)
    assert library.calls == [("nvmlInit_v2", None)]
    assert nvml_probe.early_errors == []  # pynvml's own nvmlInit names the failure


def test_an_older_library_stops_the_early_asks_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[str] = []
    monkeypatch.setattr(nvml_probe, "early_errors", errors)
    library = FakeLibrary(gpus=2, missing="nvmlDeviceGetCurrentClocksEventReasons")
    ask_early(library)
    assert ("nvmlDeviceGetPowerUsage", 1000) in library.calls
    assert ("nvmlDeviceGetHandleByIndex_v2", 1) not in library.calls  # stopped at the first gap
    assert errors == ["undefined symbol: nvmlDeviceGetCurrentClocksEventReasons"]


def test_no_driver_library(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[str] = []
    monkeypatch.setattr(nvml_probe, "early_errors", errors)

    def load(name: str) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    nvml_probe.open_driver_early(load).join(10)
    assert errors == ["libnvidia-ml.so.1: cannot open shared object file"]


def test_wait_closed_waits_for_the_background_shutdown(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    release = threading.Event()
    fake = make_nvml(hang=release, hang_in="nvmlShutdown")
    collect_nvml(ctx, fake.module())
    assert nvml_probe.wait_closed(0.2) is False  # still inside nvmlShutdown
    release.set()
    assert nvml_probe.wait_closed(10) is True
    assert fake.shutdowns == 1

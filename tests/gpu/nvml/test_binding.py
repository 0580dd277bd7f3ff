"""The one way into NVML: loading the binding, naming its errors, asking it, batched field values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from cuda_doctor.gpu.nvml import binding
from cuda_doctor.gpu.nvml.binding import NvmlUnavailable, Refusal

MakeNvml = Callable[..., Any]
GPU0 = 1000  # the fake's handle of GPU 0


def test_a_missing_binding_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    with pytest.raises(NvmlUnavailable) as failed:
        binding.load()
    assert failed.value.status == "library_not_found"
    assert str(failed.value).startswith("nvidia-ml-py (module pynvml) cannot be imported: ")


def test_init_failures_keep_nvml_own_words(make_nvml: MakeNvml) -> None:
    with pytest.raises(NvmlUnavailable) as failed:
        binding.init(make_nvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED).module())
    assert failed.value.status == "not_loaded"
    assert str(failed.value) == "NVIDIA kernel driver not loaded (Driver Not Loaded)"
    assert failed.value.detail == "Driver Not Loaded"


def test_ask_names_the_refusal(make_nvml: MakeNvml) -> None:
    nvml = make_nvml(errors={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NOT_SUPPORTED}).module()
    refused = binding.ask(nvml, ("nvmlDeviceGetPowerUsage",), GPU0)
    assert isinstance(refused, Refusal) and refused.not_supported
    assert refused.reason == "NVML nvmlDeviceGetPowerUsage: Not Supported"
    missing = binding.ask(nvml, ("nvmlDeviceGetNoSuchThing",), GPU0)
    assert isinstance(missing, Refusal) and missing.code is None
    assert missing.reason == "this nvidia-ml-py has no nvmlDeviceGetNoSuchThing"
    assert binding.ask(nvml, ("nvmlDeviceGetTemperature",), GPU0, pynvml.NVML_TEMPERATURE_GPU) == 36


def test_a_failed_shutdown_is_returned_in_words(make_nvml: MakeNvml) -> None:
    nvml = make_nvml(errors={"nvmlShutdown": pynvml.NVML_ERROR_UNKNOWN}).module()
    assert binding.shutdown(nvml) == "Unknown Error"
    assert binding.shutdown(make_nvml().module()) is None


def test_strings_are_decoded_whatever_the_binding_returns() -> None:
    assert binding.text(b"NVIDIA H200") == binding.text("NVIDIA H200") == "NVIDIA H200"


def test_field_values_in_one_round_trip(make_nvml: MakeNvml) -> None:
    fake = make_nvml(
        field_values={
            pynvml.NVML_FI_DEV_REMAPPED_PENDING: (pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 0),
            pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: (pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 3),
            pynvml.NVML_FI_DEV_POWER_INSTANT: (pynvml.NVML_VALUE_TYPE_DOUBLE, 77.5),
        }
    )
    asked = [
        pynvml.NVML_FI_DEV_REMAPPED_PENDING,
        pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
        pynvml.NVML_FI_DEV_MEMORY_TEMP,  # this GPU has no such reading
        pynvml.NVML_FI_DEV_POWER_INSTANT,
    ]
    pending, uncorrected, memory_temp, power = binding.field_values(fake.module(), GPU0, asked)
    assert (pending, uncorrected, power) == (0, 3, 77.5)
    assert isinstance(memory_temp, Refusal) and memory_temp.not_supported
    assert memory_temp.reason == f"NVML field {pynvml.NVML_FI_DEV_MEMORY_TEMP}: Not Supported"
    assert fake.calls == ["nvmlDeviceGetFieldValues"]  # one call for all four


def test_field_values_without_the_function(make_nvml: MakeNvml) -> None:
    nvml = make_nvml(missing={"nvmlDeviceGetFieldValues"}).module()
    values = binding.field_values(nvml, GPU0, [pynvml.NVML_FI_DEV_REMAPPED_PENDING, pynvml.NVML_FI_DEV_ENERGY])
    assert [v.reason for v in values] == ["this nvidia-ml-py has no nvmlDeviceGetFieldValues"] * 2


def test_mig_instances_are_listed_with_their_gpu(make_nvml: MakeNvml) -> None:
    fake = make_nvml(device_count=2, mig_devices={1: ["MIG-aaaa-0001", "MIG-aaaa-0002"]})
    nvml = fake.module()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(2)]
    assert binding.mig_parents(nvml, handles) == {"MIG-aaaa-0001": 1, "MIG-aaaa-0002": 1}
    older = make_nvml(device_count=2, missing={"nvmlDeviceGetMaxMigDeviceCount"}).module()
    assert binding.mig_parents(older, handles) is None  # not known, which is not "none"


def test_a_junk_library_on_the_loader_path_is_found_but_not_loadable(tmp_path: Path) -> None:
    """As a real process, with the real nvidia-ml-py and a real junk file first on
    LD_LIBRARY_PATH (which the loader searches before anything this host has)."""
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "libnvidia-ml.so.1").write_bytes(b"this is not an ELF shared object\n" * 64)
    empty = tmp_path / "bin"  # no nvidia-smi to fall back on
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DOCTOR_DISABLE_NVML"}
    env.update(LD_LIBRARY_PATH=str(junk), PATH=str(empty), XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cuda-doctor")), "check", "--fast", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    values = report["facts"]["values"]
    library = junk / "libnvidia-ml.so.1"
    assert values["driver.status"] == "library_unloadable"
    assert values["nvml.error"] == (
        f"libnvidia-ml.so.1 was found at {library} but cannot be loaded: invalid ELF header"
    )
    cd101 = next(r for r in report["results"] if r["rule"] == "CD101")
    assert cd101["message"].startswith("the NVIDIA driver library was found but cannot be loaded: ")
    assert str(library) in cd101["message"]
    assert "Install the NVIDIA driver" not in (cd101["fix"] or "")


def test_a_library_that_is_not_there_is_still_not_found() -> None:
    status, reason = binding._library_failure(
        "NVML Shared Library Not Found",
        "libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
    )
    assert (status, reason) == ("library_not_found", "libnvidia-ml.so.1 not found (NVML Shared Library Not Found)")


def test_a_missing_dependency_is_named_with_the_library_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "libnvidia-ml.so.1").write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nonexistent:{tmp_path}")
    status, reason = binding._library_failure(
        "NVML Shared Library Not Found", "libfoo.so.2: cannot open shared object file: No such file or directory"
    )
    assert status == "library_unloadable"
    assert reason == (
        f"libnvidia-ml.so.1 was found at {tmp_path / 'libnvidia-ml.so.1'} but cannot be loaded: "
        "libfoo.so.2: cannot open shared object file: No such file or directory"
    )

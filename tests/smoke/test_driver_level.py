"""The driver-level smoke script, run for real in a child process (libcuda faked in C)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuda_doctor.smoke.runner import script_source

CUDA_DOCTOR = str(Path(sys.executable).with_name("cuda-doctor"))


def run_script(config: dict[str, object], env: dict[str, str]) -> tuple[list[str], dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, "-c", script_source("driver"), json.dumps(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    steps = [r["step"] for r in records if "step" in r]
    results = [r["result"] for r in records if "result" in r]
    assert len(results) == 1
    return steps, results[0]


def test_no_driver_is_a_clean_result(clean_env: dict[str, str], tmp_path: Path) -> None:
    missing = str(tmp_path / "usr/lib/x86_64-linux-gnu/libcuda.so.1")
    steps, result = run_script({"candidates": [missing], "search_default": False}, clean_env)
    assert steps == ["load libcuda"]
    assert result["status"] == "no_driver"
    assert result["error"] == "libcuda.so.1 not found"


def test_broken_library_file_is_reported(clean_env: dict[str, str], tmp_path: Path) -> None:
    broken = tmp_path / "libcuda.so.1"
    broken.write_text("not an ELF file")
    _steps, result = run_script({"candidates": [str(broken)], "search_default": False}, clean_env)
    assert result["status"] == "no_driver"
    assert str(broken) in str(result["error"])


def test_vector_add_runs_and_is_verified(clean_env: dict[str, str], fake_libcuda_dir: Path) -> None:
    lib = str(fake_libcuda_dir / "libcuda.so.1")
    steps, result = run_script({"candidates": [lib], "search_default": False}, clean_env)
    assert steps == ["load libcuda", "cuInit", "vector add on GPU 0"]
    assert result["status"] == "ok"
    assert result["driver_cuda_version"] == 13000
    device = result["devices"][0]  # type: ignore[index]
    assert device["vector_add_ok"] is True
    assert device["name"] == "Fake GPU" and device["capability"] == "9.0"
    assert device["ptx"] == "6.0 sm_50"


def test_wrong_sums_are_caught(clean_env: dict[str, str], fake_libcuda_dir: Path) -> None:
    lib = str(fake_libcuda_dir / "libcuda.so.1")
    env = {**clean_env, "FAKE_CUDA_MODE": "wrong"}
    _steps, result = run_script({"candidates": [lib], "search_default": False}, env)
    assert result["status"] == "failed"
    assert result["devices"][0]["wrong_elements"] == 1  # type: ignore[index]
    assert result["error"] == "GPU 0: 1 wrong elements"


def test_cuinit_error_is_named_by_the_driver(clean_env: dict[str, str], fake_libcuda_dir: Path) -> None:
    lib = str(fake_libcuda_dir / "libcuda.so.1")
    env = {**clean_env, "FAKE_CUDA_MODE": "no_device"}
    _steps, result = run_script({"candidates": [lib], "search_default": False}, env)
    assert result["status"] == "failed"
    assert result["error_name"] == "CUDA_ERROR_NO_DEVICE"
    assert result["error"] == "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"


def test_ptx_refused_on_every_target(clean_env: dict[str, str], fake_libcuda_dir: Path) -> None:
    env = {**clean_env, "FAKE_CUDA_MODE": "invalid_ptx", "LD_LIBRARY_PATH": str(fake_libcuda_dir)}
    # Found through the loader's own search (LD_LIBRARY_PATH), as on a live system.
    _steps, result = run_script({"candidates": [], "search_default": True}, env)
    assert result["library"] == str(fake_libcuda_dir / "libcuda.so.1")  # the file the loader opened
    assert result["error_name"] == "CUDA_ERROR_INVALID_PTX"
    assert result["devices"][0]["vector_add_ok"] is False  # type: ignore[index]
    assert "cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX (218)" in str(result["error"])


def test_the_toolkit_stub_is_named_with_the_path_loaded(
    clean_env: dict[str, str], fake_libcuda_dir: Path, tmp_path: Path
) -> None:
    # as the CUDA toolkit lays it out: lib64/stubs, found through LD_LIBRARY_PATH
    stubs = tmp_path / "cuda" / "lib64" / "stubs"
    stubs.mkdir(parents=True)
    shutil.copy(fake_libcuda_dir / "libcuda.so.1", stubs / "libcuda.so.1")
    env = {**clean_env, "FAKE_CUDA_MODE": "stub", "LD_LIBRARY_PATH": str(stubs)}
    steps, result = run_script({"candidates": [], "search_default": True}, env)
    assert steps == ["load libcuda", "cuInit"]
    assert result["library"] == str(stubs / "libcuda.so.1")
    assert result["error_name"] == "CUDA_ERROR_STUB_LIBRARY" and result["error_code"] == 34
    assert result["error"] == "cuInit failed: CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library"


def test_smoke_end_to_end_says_to_take_the_stubs_folder_out_of_ld_library_path(
    fake_libcuda_dir: Path, fake_nvidia_smi: Any, python_without_torch: str, tmp_path: Path
) -> None:
    """`cuda-doctor smoke` as a real process: the stub, not a wedged driver, with the fix."""
    lib64 = tmp_path / "cuda" / "lib64"
    (lib64 / "stubs").mkdir(parents=True)
    shutil.copy(fake_libcuda_dir / "libcuda.so.1", lib64 / "stubs" / "libcuda.so.1")
    env = {
        **os.environ,
        **fake_nvidia_smi.ctx("ok").env,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "FAKE_CUDA_MODE": "stub",
        "LD_LIBRARY_PATH": f"{lib64 / 'stubs'}:{lib64}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    env.pop("CUDA_DOCTOR_SMOKE_TEST_HANG", None)
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("cuda-doctor")),
            "smoke",
            "--format",
            "json",
            "--python",
            python_without_torch,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    cd702 = next(r for r in json.loads(done.stdout)["results"] if r["rule"] == "CD702")
    assert cd702["status"] == "fail"
    assert cd702["message"].startswith(f"the libcuda that was loaded, {lib64 / 'stubs' / 'libcuda.so.1'}, is the")
    assert cd702["commands"] == [f"export LD_LIBRARY_PATH={lib64}"]
    assert "Xid" not in cd702["fix"] and "reboot" not in cd702["fix"]

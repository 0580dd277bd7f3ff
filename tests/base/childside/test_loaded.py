"""The loaded-library reader: /proc/self/maps of real processes with NVIDIA's real libraries."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.base import children
from cuda_doctor.base.childside.loaded import (
    cuda_library_key,
    decode_cudart,
    decode_cudnn,
    decode_nccl,
    loaded_libraries,
    mapped_files,
    own_version,
    read_maps,
)

ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("libcudart.so.13", "cudart"),
        ("libcublasLt.so.13", "cublasLt"),
        ("libcublas.so.13", "cublas"),
        ("libcudnn_engines_precompiled.so.9", "cudnn_engines_precompiled"),
        ("libcudnn.so.9", "cudnn"),
        ("libnccl.so.2", "nccl"),
        ("libnvrtc-builtins.so.13.0", "nvrtc-builtins"),
        ("libnvrtc.alt.so.13", "nvrtc"),
        ("libnvJitLink.so.12", "nvJitLink"),
        ("libcusparseLt.so.0", "cusparseLt"),
        ("libcuda.so.580.159.04", "cuda"),
        ("libnvshmem_host.so.3", "nvshmem_host"),
        ("libcudart_static.a", None),
        ("libcudadevrt.a", None),
        ("libnvidia-ml.so.1", None),
        ("libtorch_cuda.so", None),
    ],
)
def test_cuda_library_names(name: str, key: str | None) -> None:
    assert cuda_library_key("/x/" + name) == key


def test_version_codes() -> None:
    assert decode_cudart(13000) == "13.0" and decode_cudart(12080) == "12.8"
    assert decode_cudnn(91900) == "9.19.0" and decode_cudnn(8902) == "8.9.2"
    assert decode_nccl(22809) == "2.28.9" and decode_nccl(2708) == "2.7.8"


def test_maps_of_this_process_name_its_files_once() -> None:
    files = mapped_files(read_maps())
    assert any(os.path.basename(f).startswith("libc.so") for f in files)
    assert len(files) == len(set(files))
    assert all(f.startswith("/") for f in files)  # [heap], [stack], anonymous maps are left out
    sample = "7f0-7f1 r-xp 0 08:01 42 /opt/lib/libcuda.so.580.95.05 (deleted)\n7f1-7f2 rw-p 0 00:00 0 \n"
    assert mapped_files(sample) == ["/opt/lib/libcuda.so.580.95.05"]


def test_a_version_is_never_asked_of_a_library_that_is_not_loaded(unpacked: Callable[[str], Path]) -> None:
    library = str(unpacked("nvidia-cuda-runtime==13.0.96") / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    with pytest.raises(OSError):
        own_version("cudart", library)  # RTLD_NOLOAD: it is not mapped, so nothing is loaded
    assert library not in mapped_files(read_maps())


def test_a_child_reports_the_libraries_it_really_loaded(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    cudart = unpacked("nvidia-cuda-runtime==13.0.96") / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    cufile = unpacked("nvidia-cufile==1.15.1.6") / "nvidia" / "cu13" / "lib" / "libcufile.so.0"
    script = tmp_path / "child.py"
    script.write_text(
        "import ctypes, json, sys\n"
        "from cuda_doctor.base.childside.loaded import loaded_libraries, read_maps\n"
        "for path in sys.argv[1:]:\n"
        "    ctypes.CDLL(path)\n"
        "print(json.dumps({'libraries': loaded_libraries(read_maps())}))\n"
    )
    result = children.run(sys.executable, children.compose(script), [str(cudart), str(cufile)], env=ENV, timeout=30)
    libraries = json.loads(result.stdout.strip().splitlines()[-1])["libraries"]
    by_key = {library["library"]: library for library in libraries}
    assert by_key["cudart"]["path"] == os.path.realpath(cudart)
    assert by_key["cudart"]["soname"] == "libcudart.so.13"
    assert (by_key["cudart"]["version"], by_key["cudart"]["version_source"]) == ("13.0", "library")
    assert by_key["cufile"]["version"] is None and by_key["cufile"]["problems"] == []  # no cheap query for it
    assert not [library for library in libraries if library["library"] not in ("cudart", "cufile")]


def test_a_library_without_its_version_function_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    maps = "7f0-7f1 r-xp 0 08:01 42 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    fake = tmp_path / "libnccl.so.2"
    fake.write_bytes(b"\x7fELF")  # named like NCCL, mapped by nothing: neither read can succeed
    libraries = loaded_libraries(maps.replace("/usr/lib/x86_64-linux-gnu/libc.so.6", str(fake)))
    assert libraries[0]["library"] == "nccl"
    assert libraries[0]["version"] is None and libraries[0]["soname"] is None
    assert any(problem.startswith("soname: ValueError") for problem in libraries[0]["problems"])
    assert any(problem.startswith("version: OSError") for problem in libraries[0]["problems"])

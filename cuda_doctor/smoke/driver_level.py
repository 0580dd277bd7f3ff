"""Driver-level smoke test, run by the target interpreter: a PTX vector add through libcuda with
nothing but the stdlib, telling a broken driver from a broken framework.  CONFIG:
``{"candidates": [libcuda.so.1 paths to try first], "search_default": true}``."""

from __future__ import annotations

import ctypes
import os
from typing import Any

from cuda_doctor.base.childside.script import script_main, step

LIBRARY = "libcuda.so.1"
ELEMENTS = 1 << 16
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
#: Results the library cannot name itself (a stub's cuGetErrorName is a stub too), from cuda.h.
KNOWN_ERRORS = {34: ("CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library")}
CC_MAJOR_ATTRIBUTE = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
CC_MINOR_ATTRIBUTE = 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

# The vector add in PTX, at a low ISA version and target that any driver can JIT; newer pairs
# are tried only if an old one is refused.
_PTX_BODY = """
.visible .entry vadd(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .f32 %f<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<11>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pc];
    ld.param.u32 %r2, [pn];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r1, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
DONE:
    ret;
}
"""
V2_ENTRY_POINTS = frozenset({"cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH"})
PTX_TARGETS = (("6.0", "sm_50"), ("7.0", "sm_70"), ("8.0", "sm_75"))


def ptx_source(version: str, target: str) -> bytes:
    header = f".version {version}\n.target {target}\n.address_size 64\n"
    return (header + _PTX_BODY).encode("ascii") + b"\0"


class CudaError(Exception):
    def __init__(self, call: str, code: int, name: str | None, text: str | None) -> None:
        self.call = call
        self.code = code
        self.name = name or f"CUDA_ERROR_{code}"
        self.text = text or ""
        detail = f": {text}" if text else ""
        super().__init__(f"{call} failed: {self.name} ({code}){detail}")


class Driver:
    """The few libcuda entry points the vector add needs, with errors named by the driver."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def error_name(self, code: int) -> tuple[str | None, str | None]:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        try:
            got_name = self.lib.cuGetErrorName(code, ctypes.byref(name)) == CUDA_SUCCESS
            got_text = self.lib.cuGetErrorString(code, ctypes.byref(text)) == CUDA_SUCCESS
        except AttributeError:
            return None, None
        return (
            name.value.decode() if got_name and name.value else None,
            text.value.decode() if got_text and text.value else None,
        )

    def call(self, name: str, *args: Any) -> None:
        function = self._function(name)
        code = int(function(*args))
        if code != CUDA_SUCCESS:
            error, text = self.error_name(code)
            if error is None and code in KNOWN_ERRORS:
                error, text = KNOWN_ERRORS[code]
            raise CudaError(name, code, error, text)

    def _function(self, name: str) -> Any:
        # cuda.h maps these to their _v2 (64-bit) entry points; any other _v2 may take other arguments
        candidates = (name + "_v2", name) if name in V2_ENTRY_POINTS else (name,)
        for candidate in candidates:
            function = getattr(self.lib, candidate, None)
            if function is not None:
                function.restype = ctypes.c_int
                return function
        raise CudaError(name, -1, "CUDA_ERROR_NOT_FOUND", "the driver has no entry point " + name)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def loaded_path(lib: Any, name: str) -> str:
    """The file the loader opened for ``lib`` (dladdr of one of its functions); ``name`` if that fails."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if dladdr(ctypes.cast(lib.cuInit, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.path.abspath(info.dli_fname.decode(errors="replace"))
    except (AttributeError, OSError):  # no dladdr here, or no cuInit in this library
        return name
    return name


def load_library(candidates: list[str], search_default: bool) -> tuple[Any, str | None, list[str]]:
    tried: list[str] = []
    for path in candidates:
        if not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path), path, tried
        except OSError as exc:
            tried.append(f"{path}: {exc}")
    if search_default:
        try:
            lib = ctypes.CDLL(LIBRARY)
            return lib, loaded_path(lib, LIBRARY), tried
        except OSError as exc:
            tried.append(f"{LIBRARY}: {exc}")
    return None, None, tried


def vector_add(driver: Driver, index: int) -> dict[str, Any]:
    device = ctypes.c_int()
    driver.call("cuDeviceGet", ctypes.byref(device), index)
    info: dict[str, Any] = {"index": index}
    name = ctypes.create_string_buffer(256)
    major, minor = ctypes.c_int(), ctypes.c_int()
    try:
        driver.call("cuDeviceGetName", name, 256, device)
        driver.call("cuDeviceGetAttribute", ctypes.byref(major), CC_MAJOR_ATTRIBUTE, device)
        driver.call("cuDeviceGetAttribute", ctypes.byref(minor), CC_MINOR_ATTRIBUTE, device)
        info["name"] = name.value.decode(errors="replace")
        info["capability"] = f"{major.value}.{minor.value}"
    except CudaError as exc:
        info["name_error"] = str(exc)
    # the primary context (what frameworks use) avoids cuCtxCreate, changed in CUDA 13
    context = ctypes.c_void_p()
    driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    try:
        driver.call("cuCtxSetCurrent", context)
        info.update(_run_kernel(driver))
    finally:
        lib = driver.lib
        release = getattr(lib, "cuDevicePrimaryCtxRelease_v2", None) or getattr(lib, "cuDevicePrimaryCtxRelease", None)
        if release is not None:
            release(device)
    return info


def _run_kernel(driver: Driver) -> dict[str, Any]:
    module = ctypes.c_void_p()
    refused: list[CudaError] = []
    for version, target in PTX_TARGETS:
        try:
            driver.call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(ptx_source(version, target)))
            break
        except CudaError as exc:
            refused.append(exc)
    else:
        raise refused[0]
    function = ctypes.c_void_p()
    driver.call("cuModuleGetFunction", ctypes.byref(function), module, b"vadd")
    size = ELEMENTS * 4
    host_a = (ctypes.c_float * ELEMENTS)(*[float(i % 1000) for i in range(ELEMENTS)])
    host_b = (ctypes.c_float * ELEMENTS)(*[float(2 * (i % 7)) for i in range(ELEMENTS)])
    host_c = (ctypes.c_float * ELEMENTS)()
    pointers = [ctypes.c_uint64() for _ in range(3)]
    try:
        for pointer in pointers:
            driver.call("cuMemAlloc", ctypes.byref(pointer), ctypes.c_size_t(size))
        driver.call("cuMemcpyHtoD", pointers[0], host_a, ctypes.c_size_t(size))
        driver.call("cuMemcpyHtoD", pointers[1], host_b, ctypes.c_size_t(size))
        count = ctypes.c_uint32(ELEMENTS)
        params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(arg), ctypes.c_void_p) for arg in (*pointers, count)])
        threads = 256
        blocks = (ELEMENTS + threads - 1) // threads
        driver.call("cuLaunchKernel", function, blocks, 1, 1, threads, 1, 1, 0, None, params, None)
        driver.call("cuCtxSynchronize")
        driver.call("cuMemcpyDtoH", host_c, pointers[2], ctypes.c_size_t(size))
    finally:
        free = getattr(driver.lib, "cuMemFree_v2", None) or driver.lib.cuMemFree
        for pointer in pointers:
            if pointer.value:
                free(pointer)
        driver.lib.cuModuleUnload(module)
    wrong = sum(1 for i in range(ELEMENTS) if host_c[i] != host_a[i] + host_b[i])
    return {"vector_add_ok": wrong == 0, "wrong_elements": wrong, "ptx": f"{version} {target}"}


def run(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "failed", "error": None, "error_name": None, "devices": []}
    step("load libcuda")
    lib, path, tried = load_library(list(config.get("candidates", [])), bool(config.get("search_default", True)))
    if lib is None:
        result["status"] = "no_driver"
        detail = "; ".join(tried)
        result["error"] = f"{LIBRARY} not found" + (f" ({detail})" if detail else "")
        return result
    result["library"] = path
    driver = Driver(lib)
    try:
        step("cuInit")
        driver.call("cuInit", 0)
        version = ctypes.c_int()
        driver.call("cuDriverGetVersion", ctypes.byref(version))
        result["driver_cuda_version"] = version.value
        count = ctypes.c_int()
        driver.call("cuDeviceGetCount", ctypes.byref(count))
    except CudaError as exc:
        result.update(error=str(exc), error_name=exc.name, error_code=exc.code)
        return result
    result["device_count"] = count.value
    if count.value == 0:
        result.update(error="the driver reports no CUDA device", error_name="CUDA_ERROR_NO_DEVICE")
        result["error_code"] = CUDA_ERROR_NO_DEVICE
        return result
    failures = []
    for index in range(count.value):
        step(f"vector add on GPU {index}")
        try:
            device = vector_add(driver, index)
        except CudaError as exc:
            device = {"index": index, "vector_add_ok": False, "error": str(exc), "error_name": exc.name}
            result["error_name"] = result["error_name"] or exc.name
        if not device.get("vector_add_ok"):
            problem = device.get("error") or f"{device.get('wrong_elements')} wrong elements"
            failures.append(f"GPU {index}: {problem}")
        result["devices"].append(device)
    if failures:
        result["error"] = "; ".join(failures)
    else:
        result["status"] = "ok"
    return result


def failed(exc: Exception) -> dict[str, Any]:
    """An unforeseen failure's result, in the exception's own words."""
    return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "error_name": None}


if __name__ == "__main__":
    script_main(run, failed)

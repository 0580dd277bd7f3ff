"""The smoke run's compile level, run by the target interpreter in a process of its own.

Importing torch.compile's machinery (Dynamo, Inductor, Triton) takes seconds of CPU and no GPU,
so the compile probe starts this child with the other phase-1 probes and it imports them while
they and the smoke run's other levels run; it puts nothing on a GPU until the smoke run says so,
one line ``{"go": true}`` on stdin, once its framework level is done.  Then it compiles and runs a
Triton kernel and a torch.compile'd function on every visible GPU, each checked against torch's
own result.  A missing compiler is not a broken GPU: every failure is Triton's or Inductor's own
error text, per GPU and per kind.
CONFIG: ``{"compile_cache": folder or null}``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from cuda_doctor.base.childside.compile_cache import compile_cache_folder, toolchain_identity
from cuda_doctor.base.childside.script import emit, error_text, script_main, step

#: The Triton kernel: Triton reads a kernel's source from its file, which a ``python -c`` child
#: has not, so it is written to one in the step's own cache folder.
TRITON_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)
"""
COMPILE_ELEMENTS = 1 << 16
TRITON_BLOCK = 1024


def compile_folder(config: dict[str, Any], result: dict[str, Any], torch_version: str) -> tuple[str, bool]:
    """The step's own cache folder, and whether it is a temporary one to remove after.

    The user's caches are neither trusted nor filled (docs/compile.md): the step uses the folder
    of this toolchain under ``config["compile_cache"]``, else a temporary folder.
    """
    root = config.get("compile_cache")
    if root:
        versions = {"torch": torch_version, "triton": distribution_version("triton")}
        try:
            folder, reused = compile_cache_folder(root, toolchain_identity(dict(os.environ), sys.executable, versions))
        except OSError as exc:
            result["compile_cache_error"] = error_text(exc)
        else:
            result["compile_cache"] = "reused" if reused else "new"
            return folder, False
    result["compile_cache"] = "temporary"
    return tempfile.mkdtemp(prefix="cuda-doctor-compile-"), True


def distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def triton_add(torch: Any, folder: str, x: Any, y: Any) -> bool:
    source = os.path.join(folder, "cuda_doctor_triton_add.py")
    with open(source, "w", encoding="utf-8") as handle:
        handle.write(TRITON_KERNEL)
    spec = importlib.util.spec_from_file_location("cuda_doctor_triton_add", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = torch.empty_like(x)
    module.add[(COMPILE_ELEMENTS // TRITON_BLOCK,)](x, y, out, COMPILE_ELEMENTS, BLOCK=TRITON_BLOCK)
    torch.cuda.synchronize(x.device)
    return bool(torch.equal(out, x + y))


def compiled_function(torch: Any, x: Any) -> bool:
    function = torch.compile(lambda t: torch.sin(t) * 2 + t)
    result = function(x)
    torch.cuda.synchronize(x.device)
    return bool(torch.allclose(result, torch.sin(x) * 2 + x, rtol=1e-5, atol=1e-5))


def compile_on(torch: Any, index: int, folder: str, unavailable: str | None) -> dict[str, Any]:
    """Both compiles on GPU ``index``; ``unavailable``: why torch.compile cannot even be imported."""
    device: dict[str, Any] = {"index": index, "step_seconds": {}}
    step(f"inputs on GPU {index}")
    try:
        x = torch.rand(COMPILE_ELEMENTS, device=f"cuda:{index}")
        y = torch.rand(COMPILE_ELEMENTS, device=f"cuda:{index}")
    except Exception as exc:  # no memory, or a GPU that fails: not the toolchain's fault
        device["error"] = error_text(exc)
        return device
    actions = (
        ("triton_compile", lambda: triton_add(torch, folder, x, y)),
        ("torch_compile", lambda: compiled_function(torch, x)),
    )
    for key, action in actions:
        step(f"{key.replace('_', ' ')} on GPU {index}")
        started = time.perf_counter()
        if key == "torch_compile" and unavailable is not None:
            device[key] = unavailable
            continue
        try:
            device[key] = "ok" if action() else "wrong result"
        except Exception as exc:  # Triton's or Inductor's own error text is the finding
            device[key] = error_text(exc)
        device["step_seconds"][key] = round(time.perf_counter() - started, 3)
    return device


def run(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "failed", "error": None, "devices": []}
    # one small kernel needs no worker pool: Inductor's would start a process per core, each
    # importing torch, while the smoke run measures the machine (read when Inductor is imported)
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    step("import torch")
    started = time.perf_counter()
    try:
        import torch
    except ImportError as exc:
        result.update(status="no_torch", error=error_text(exc))
        return result
    step("import torch.compile")
    unavailable = None
    try:  # what the first torch.compile call imports; a broken Inductor or Triton fails here
        import torch._dynamo
        import torch._inductor.compile_fx
    except Exception as exc:
        unavailable = error_text(exc)
    result["import_seconds"] = round(time.perf_counter() - started, 3)
    step("wait for the GPUs")
    emit({"ready": True})
    try:
        order = json.loads(sys.stdin.readline() or "{}")
    except ValueError:
        order = {}
    if not isinstance(order, dict) or not order.get("go"):
        result.update(status="not_run", error="the GPUs were not handed over")
        return result
    started = time.perf_counter()
    count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    folder, temporary = compile_folder(config, result, str(torch.__version__))
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "inductor")
    try:
        for index in range(count):
            device = compile_on(torch, index, folder, unavailable)
            emit({"device": device})  # kept by the parent even if a later GPU hangs
            result["devices"].append(device)
    finally:
        if temporary:
            try:
                shutil.rmtree(folder)
            except OSError as exc:
                result["compile_dir_left"] = f"{folder}: {exc}"
    result["compile_seconds"] = round(time.perf_counter() - started, 3)
    result["status"] = "ok"
    return result


if __name__ == "__main__":
    script_main(run)

"""Report what torch and TensorFlow see, from inside the interpreter being inspected.

This file is run as ``python -c <its source> [CONFIG]`` by the target interpreter, which need
not have cuda-doctor installed, so it uses the standard library (and the frameworks) only and
keeps to syntax that Python 3.7 understands.  It prints records (``cuda_doctor.children``) on
stdout: ``{"started": true}`` first, ``{"step": "import torch"}`` before each framework import,
then the report, ``{"values": {fact: value}, "unknown": {fact: reason}}``.  It never lets an
exception out: each step that fails becomes an unknown fact with the error text.

With CONFIG ``{"then": "wait"}`` it then waits for one more order on stdin (``run_next``): the
smoke run's framework-level script, run in this same process, so that a check imports torch
once; the parent sends it only when the read-only probes are done, so that the GPU probe never
counts cuda-doctor's own kernels as another process on the GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

#: The first line the child prints, before importing any framework: it proves the interpreter
#: runs, so the parent can give up early on one that does not start.
STARTED = '{"started": true}'


def new_report() -> dict[str, dict[str, Any]]:
    return {"values": {}, "unknown": {}}


def put(report: dict[str, dict[str, Any]], name: str, value: Any) -> None:
    report["values"][name] = value
    report["unknown"].pop(name, None)


def miss(report: dict[str, dict[str, Any]], name: str, reason: str) -> None:
    if name not in report["values"]:
        report["unknown"][name] = reason


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return type(exc).__name__ + (": " + first if first else "")


def last_line(exc: BaseException) -> str:
    """The last line a traceback of ``exc`` ends with: its type and the last line of its text."""
    text = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return type(exc).__name__ + (": " + text[-1] if text else "")


def attempt(report: dict[str, dict[str, Any]], names: list[str], step: Callable[[], None]) -> None:
    """Run ``step``; if it fails, every name it was meant to set becomes unknown."""
    try:
        step()
    except BaseException as exc:  # a framework may raise anything, even SystemExit
        for name in names:
            miss(report, name, describe(exc))


# -- pure helpers (unit-tested in-process) ---------------------------------------------------
def version_base(version: str) -> str:
    """``2.11.0+cu130`` → ``2.11.0``; ``2.6.0a0+git1234`` → ``2.6.0a0``."""
    return version.split("+", 1)[0]


def capability_text(major: int, minor: int) -> str:
    return f"{major}.{minor}"


def bf16_native(capabilities: list[str]) -> bool:
    """Native bf16 needs compute capability 8.0 (Ampere) or newer; older GPUs only emulate it."""
    for cap in capabilities:
        try:
            major = int(cap.split(".", 1)[0])
        except ValueError:
            continue
        if major >= 8:
            return True
    return False


def nccl_text(version: Any) -> str | None:
    """NCCL's version as ``a.b.c`` from a tuple (torch ≥ 1.10) or the packed integer code."""
    if version is None:
        return None
    if isinstance(version, (tuple, list)):
        return ".".join(str(int(part)) for part in version)
    code = int(version)
    # NCCL_VERSION_CODE is major*1000+minor*100+patch before 2.9, major*10000+minor*100+patch after.
    if code >= 10000:
        major, rest = divmod(code, 10000)
    else:
        major, rest = divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def arch_list_from_flags(flags: Any) -> list[str]:
    """``"sm_75 sm_80 compute_90"`` → ``["sm_75", "sm_80", "compute_90"]``."""
    if not flags:
        return []
    return [part for part in str(flags).split() if part]


def warning_text(caught: list[Any]) -> str | None:
    messages = []
    for item in caught:
        text = str(getattr(item, "message", item)).strip()
        if text and text not in messages:
            messages.append(text)
    return "\n".join(messages) if messages else None


# -- torch ----------------------------------------------------------------------------------
TORCH_FACTS = [
    "torch.version",
    "torch.version_base",
    "torch.cuda_build",
    "torch.hip_build",
    "torch.cuda_available",
    "torch.cuda_error",
    "torch.device_count",
    "torch.arch_list",
    "torch.device_capabilities",
    "torch.device_names",
    "torch.cudnn_version",
    "torch.nccl_version",
    "torch.bf16_native",
    "torch.import_seconds",
]

TENSORFLOW_FACTS = [
    "tensorflow.version",
    "tensorflow.is_cuda_build",
    "tensorflow.cuda_build",
    "tensorflow.cudnn_build",
    "tensorflow.gpus",
]


def probe_torch(report: dict[str, dict[str, Any]], emit: Callable[[dict[str, Any]], None]) -> None:
    if importlib.util.find_spec("torch") is None:
        put(report, "torch.installed", False)
        for name in TORCH_FACTS:
            miss(report, name, "torch is not installed in " + sys.executable)
        return
    put(report, "torch.installed", True)
    emit({"step": "import torch"})
    start = time.monotonic()
    try:
        import torch
    except BaseException as exc:
        # A fact of its own, so that a report can say that the import failed and why.
        put(report, "torch.import_error", last_line(exc))
        reason = "import torch failed: " + describe(exc)
        for name in TORCH_FACTS:
            miss(report, name, reason)
        return
    put(report, "torch.import_seconds", round(time.monotonic() - start, 3))
    put(report, "torch.import_error", None)
    steps = (
        (["torch.version", "torch.version_base", "torch.cuda_build", "torch.hip_build"], torch_versions),
        (["torch.arch_list"], torch_arch_list),
        (["torch.cuda_available", "torch.cuda_error"], torch_availability),
        (["torch.device_count", "torch.device_capabilities", "torch.device_names", "torch.bf16_native"], torch_devices),
        (["torch.cudnn_version"], torch_cudnn),
        (["torch.nccl_version"], torch_nccl),
    )
    for names, step in steps:
        attempt(report, names, functools.partial(step, report, torch))


def torch_versions(report: dict[str, dict[str, Any]], torch: Any) -> None:
    version = str(torch.__version__)
    put(report, "torch.version", version)
    put(report, "torch.version_base", version_base(version))
    put(report, "torch.cuda_build", getattr(torch.version, "cuda", None))
    put(report, "torch.hip_build", getattr(torch.version, "hip", None))


def torch_arch_list(report: dict[str, dict[str, Any]], torch: Any) -> None:
    # get_arch_list() answers [] whenever CUDA is unavailable; the compiled list does not
    # depend on a driver, so read it directly where this build has it.
    flags_fn = getattr(torch._C, "_cuda_getArchFlags", None)
    if flags_fn is not None:
        put(report, "torch.arch_list", arch_list_from_flags(flags_fn()))
    else:
        put(report, "torch.arch_list", list(torch.cuda.get_arch_list()))


def torch_availability(report: dict[str, dict[str, Any]], torch: Any) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
    put(report, "torch.cuda_available", available)
    error = None if available else warning_text(caught)
    if error is None and not available and report["values"].get("torch.cuda_build"):
        # A CUDA build that says "unavailable" without a warning (e.g. no visible
        # device): initialising explains why.
        try:
            with warnings.catch_warnings(record=True) as caught_init:
                warnings.simplefilter("always")
                torch.cuda.init()
            error = warning_text(caught_init)
        except BaseException as exc:
            error = describe(exc)
    put(report, "torch.cuda_error", error)


def torch_devices(report: dict[str, dict[str, Any]], torch: Any) -> None:
    count = int(torch.cuda.device_count()) if report["values"].get("torch.cuda_available") else 0
    put(report, "torch.device_count", count)
    caps = []
    names = []
    for index in range(count):
        major, minor = torch.cuda.get_device_capability(index)
        caps.append(capability_text(major, minor))
        names.append(str(torch.cuda.get_device_name(index)))
    put(report, "torch.device_capabilities", caps)
    put(report, "torch.device_names", names)
    put(report, "torch.bf16_native", bf16_native(caps))


def torch_cudnn(report: dict[str, dict[str, Any]], torch: Any) -> None:
    version = torch.backends.cudnn.version()
    put(report, "torch.cudnn_version", None if version is None else int(version))


def torch_nccl(report: dict[str, dict[str, Any]], torch: Any) -> None:
    if not report["values"].get("torch.cuda_build"):
        put(report, "torch.nccl_version", None)  # CPU-only and ROCm builds carry no NCCL
        return
    import torch.cuda.nccl as nccl_module

    put(report, "torch.nccl_version", nccl_text(nccl_module.version()))


# -- TensorFlow -----------------------------------------------------------------------------
def probe_tensorflow(report: dict[str, dict[str, Any]], emit: Callable[[dict[str, Any]], None]) -> None:
    if importlib.util.find_spec("tensorflow") is None:
        put(report, "tensorflow.installed", False)
        for name in TENSORFLOW_FACTS:
            miss(report, name, "tensorflow is not installed in " + sys.executable)
        return
    put(report, "tensorflow.installed", True)
    emit({"step": "import tensorflow"})
    try:
        import tensorflow as tf
    except BaseException as exc:
        reason = "import tensorflow failed: " + describe(exc)
        for name in TENSORFLOW_FACTS:
            miss(report, name, reason)
        return

    attempt(report, ["tensorflow.version"], lambda: put(report, "tensorflow.version", str(tf.__version__)))

    def build() -> None:
        info = dict(tf.sysconfig.get_build_info())
        put(report, "tensorflow.is_cuda_build", bool(info.get("is_cuda_build", False)))
        cuda = info.get("cuda_version")
        cudnn = info.get("cudnn_version")
        put(report, "tensorflow.cuda_build", None if cuda is None else str(cuda))
        put(report, "tensorflow.cudnn_build", None if cudnn is None else str(cudnn))

    attempt(report, ["tensorflow.is_cuda_build", "tensorflow.cuda_build", "tensorflow.cudnn_build"], build)

    def gpus() -> None:
        names = []
        for device in tf.config.list_physical_devices("GPU"):
            name = str(device.name)
            try:
                details = tf.config.experimental.get_device_details(device)
                name = str(details.get("device_name", name))
            except Exception:  # details are optional; the device's own name stands
                name = str(device.name)
            names.append(name)
        put(report, "tensorflow.gpus", names)

    attempt(report, ["tensorflow.gpus"], gpus)


def collect(emit: Callable[[dict[str, Any]], None]) -> dict[str, dict[str, Any]]:
    report = new_report()
    put(report, "framework.python", sys.executable)
    put(report, "framework.python_version", platform.python_version())
    steps = (
        (probe_torch, ["torch.installed", *TORCH_FACTS]),
        (probe_tensorflow, ["tensorflow.installed", *TENSORFLOW_FACTS]),
    )
    for step, names in steps:
        attempt(report, names, functools.partial(step, report, emit))
    return report


def run_next(records_fd: int) -> None:
    """Wait for the parent's next order, one JSON line on stdin: a script to run in this
    interpreter, where torch is imported already (``{"run": SOURCE, "argv": [ARG, …]}``), or
    the end (anything else, or stdin closed).  The script runs as ``python -c SOURCE ARG…``
    would run it, its stdout the records pipe again."""
    line = sys.stdin.readline()
    try:
        order = json.loads(line)
    except ValueError:
        return
    source = order.get("run") if isinstance(order, dict) else None
    if not isinstance(source, str):
        return
    sys.stdout.flush()  # what the frameworks printed so far belongs on stderr
    os.dup2(records_fd, 1)
    sys.argv = ["-c", *[str(arg) for arg in order.get("argv", [])]]
    exec(compile(source, "<cuda-doctor>", "exec"), {"__name__": "__main__"})


def main() -> None:
    os.write(1, (STARTED + "\n").encode("ascii"))
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    # Keep fd 1 for records alone: whatever the frameworks print (even from C) goes to stderr.
    records_fd = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(records_fd, "w", closefd=False)

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record, default=str) + "\n")
        out.flush()

    emit(collect(emit))
    sys.stderr.flush()
    if config.get("then") == "wait":  # for the smoke steps, once the read-only probes are done
        try:
            run_next(records_fd)
        except BaseException:  # the script's own failure: its traceback on stderr says why
            traceback.print_exc()
            status = 1
        else:
            status = 0
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(status)
    # Skip interpreter teardown: CUDA and TensorFlow shutdown can hang or crash after the answer.
    os._exit(0)


if __name__ == "__main__":
    main()

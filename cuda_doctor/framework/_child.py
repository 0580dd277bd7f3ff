"""Report what torch and TensorFlow see, from inside the inspected interpreter (standard library and
Python 3.7 syntax only): records of its ``sys.path``, each slow step, then the report, where a
failing step becomes unknown facts.  With CONFIG ``{"then": "wait"}`` it then runs the smoke
script in this process (sent once the read-only probes are done), so that a check imports torch once."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from cuda_doctor.base.childside.allocator import check_settings, rejection
from cuda_doctor.base.childside.loaded import decode_nccl, loaded_libraries, read_maps
from cuda_doctor.base.childside.packages import (
    Installed,
    build_files,
    installed,
    metadata_field,
    owners,
    record_files,
    requirement_name,
)
from cuda_doctor.base.childside.report import (
    attempt,
    describe,
    end,
    miss,
    new_report,
    open_records,
    put,
    run_order,
    serve,
)


def last_line(exc: BaseException) -> str:
    """The last line a traceback of ``exc`` ends with: its type and the last line of its text."""
    text = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return type(exc).__name__ + (": " + text[-1] if text else "")


def miss_all(report: dict[str, dict[str, Any]], names: list[str], reason: str) -> None:
    for name in names:
        miss(report, name, reason)


def present(report: dict[str, dict[str, Any]], framework: str, names: list[str]) -> bool:
    """``<framework>.installed``, found without importing it; if absent, ``names`` say so."""
    found = importlib.util.find_spec(framework) is not None
    put(report, framework + ".installed", found)
    if not found:
        miss_all(report, names, f"{framework} is not installed in {sys.executable}")
    return found


# -- pure helpers (unit-tested in-process) ---------------------------------------------------
def version_base(version: str) -> str:
    """``2.11.0+cu130`` → ``2.11.0``; ``2.6.0a0+git1234`` → ``2.6.0a0``."""
    return version.split("+", 1)[0]


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
    return decode_nccl(int(version))


def arch_list_from_flags(flags: Any) -> list[str]:
    """``"sm_75 sm_80 compute_90"`` → ``["sm_75", "sm_80", "compute_90"]``."""
    return str(flags).split() if flags else []


def warning_text(caught: list[Any]) -> str | None:
    messages = []
    for item in caught:
        text = str(getattr(item, "message", item)).strip()
        if text and text not in messages:
            messages.append(text)
    return "\n".join(messages) if messages else None


def warned(call: Callable[[], Any]) -> tuple[Any, str | None]:
    """What ``call`` returns, and the text of the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, warning_text(caught)


TORCH_FACTS = [
    "torch.version", "torch.version_base", "torch.cuda_build", "torch.hip_build", "torch.cuda_available",
    "torch.cuda_error", "torch.device_count", "torch.arch_list", "torch.device_capabilities",
    "torch.device_names", "torch.cudnn_version", "torch.nccl_version", "torch.bf16_native", "torch.import_seconds",
    "torch.cudnn_compiled", "torch.cudnn_runtime", "torch.cudnn_error",
]  # fmt: skip
#: torch's own verdict on PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF, asked before CUDA starts.
ALLOCATOR_FACTS = [
    "torch.alloc_conf", "torch.alloc_conf_variable", "torch.alloc_conf_error", "torch.alloc_conf_warnings",
]  # fmt: skip
TENSORFLOW_FACTS = [
    "tensorflow.version", "tensorflow.is_cuda_build", "tensorflow.cuda_build", "tensorflow.cudnn_build",
    "tensorflow.gpus",
]  # fmt: skip


def probe_torch(report: dict[str, dict[str, Any]], emit: Callable[[dict[str, Any]], None]) -> None:
    if not present(report, "torch", TORCH_FACTS + ALLOCATOR_FACTS):
        return
    emit({"step": "import torch"})
    start = time.monotonic()
    try:
        import torch
    except BaseException as exc:
        # A fact of its own, so that a report can say that the import failed and why.
        put(report, "torch.import_error", last_line(exc))
        miss_all(report, TORCH_FACTS + ALLOCATOR_FACTS, "import torch failed: " + describe(exc))
        return
    put(report, "torch.import_seconds", round(time.monotonic() - start, 3))
    put(report, "torch.import_error", None)
    steps = (
        (["torch.version", "torch.version_base", "torch.cuda_build", "torch.hip_build"], torch_versions),
        (ALLOCATOR_FACTS, torch_allocator),  # before anything starts CUDA, which parses the settings
        (["torch.arch_list"], torch_arch_list),
        (["torch.cuda_available", "torch.cuda_error"], torch_availability),
        (["torch.device_count", "torch.device_capabilities", "torch.device_names", "torch.bf16_native"], torch_devices),
        (["torch.cudnn_version", "torch.cudnn_compiled", "torch.cudnn_runtime", "torch.cudnn_error"], torch_cudnn),
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
    # get_arch_list() answers [] whenever CUDA is unavailable; the compiled list needs no driver.
    flags_fn = getattr(torch._C, "_cuda_getArchFlags", None)
    arches = arch_list_from_flags(flags_fn()) if flags_fn is not None else list(torch.cuda.get_arch_list())
    put(report, "torch.arch_list", arches)


def torch_allocator(report: dict[str, dict[str, Any]], torch: Any) -> None:
    answer = check_settings(torch, os.environ)
    put(report, "torch.alloc_conf", answer["variables"])
    put(report, "torch.alloc_conf_variable", answer["variable"])
    if not report["values"].get("torch.cuda_build"):
        reason = "this torch has no CUDA allocator to read the settings"
        miss_all(report, ["torch.alloc_conf_error", "torch.alloc_conf_warnings"], reason)
    elif answer["parser"] is None:
        reason = f"torch {torch.__version__} has no parser of the allocator settings to ask"
        miss_all(report, ["torch.alloc_conf_error", "torch.alloc_conf_warnings"], reason)
    else:
        put(report, "torch.alloc_conf_error", answer["error"])
        put(report, "torch.alloc_conf_warnings", answer["warnings"])


def cuda_refused(report: dict[str, dict[str, Any]]) -> str | None:
    """Why CUDA must not be started here: torch would raise at its start, and a second start after
    a failed one can crash the process (its allocator half made); None when nothing stops it."""
    error = report["values"].get("torch.alloc_conf_error")
    if not error:
        return None
    name = report["values"].get("torch.alloc_conf_variable")
    value = (report["values"].get("torch.alloc_conf") or {}).get(name, "")
    return rejection({"variable": name, "variables": {name: value}, "error": error})


def torch_availability(report: dict[str, dict[str, Any]], torch: Any) -> None:
    result, error = warned(torch.cuda.is_available)
    available = bool(result)
    put(report, "torch.cuda_available", available)
    if available:
        error = None
    elif error is None and report["values"].get("torch.cuda_build"):
        # A CUDA build that says "unavailable" without a warning: initialising explains why.
        try:
            error = warned(torch.cuda.init)[1]
        except BaseException as exc:
            error = describe(exc)
    put(report, "torch.cuda_error", error)


def torch_devices(report: dict[str, dict[str, Any]], torch: Any) -> None:
    count = int(torch.cuda.device_count()) if report["values"].get("torch.cuda_available") else 0
    put(report, "torch.device_count", count)
    refused = cuda_refused(report) if count else None
    if refused is not None:  # the capabilities need CUDA started
        names = ["torch.device_capabilities", "torch.device_names", "torch.bf16_native"]
        miss_all(report, names, f"CUDA was not started: {refused}")
        return
    caps = []
    names = []
    for index in range(count):
        major, minor = torch.cuda.get_device_capability(index)
        caps.append(f"{major}.{minor}")
        names.append(str(torch.cuda.get_device_name(index)))
    put(report, "torch.device_capabilities", caps)
    put(report, "torch.device_names", names)
    put(report, "torch.bf16_native", bf16_native(caps))


#: The error text kept of torch's cuDNN check (its advice about LD_LIBRARY_PATH follows the versions).
CUDNN_ERROR_CAP = 1000


def torch_cudnn(report: dict[str, dict[str, Any]], torch: Any) -> None:
    """cuDNN's version, and the versions torch compares before it accepts the loaded library:
    ``version()`` raises "cuDNN version incompatibility" when they do not fit."""
    module = getattr(torch._C, "_cudnn", None)  # absent in builds without cuDNN
    for fact, name in (("torch.cudnn_compiled", "getCompileVersion"), ("torch.cudnn_runtime", "getRuntimeVersion")):
        query = getattr(module, name, None)
        put(report, fact, ".".join(str(int(part)) for part in query()) if query is not None else None)
    try:
        version = torch.backends.cudnn.version()
    except RuntimeError as exc:  # torch's check refused the loaded cuDNN: every cuDNN call raises the same
        text = " ".join(str(exc).split())[:CUDNN_ERROR_CAP]
        put(report, "torch.cudnn_error", text)
        miss(report, "torch.cudnn_version", "torch.backends.cudnn.version() raised RuntimeError: " + text)
        return
    put(report, "torch.cudnn_error", None)
    put(report, "torch.cudnn_version", None if version is None else int(version))


def torch_nccl(report: dict[str, dict[str, Any]], torch: Any) -> None:
    if not report["values"].get("torch.cuda_build"):
        put(report, "torch.nccl_version", None)  # CPU-only and ROCm builds carry no NCCL
        return
    import torch.cuda.nccl as nccl_module

    put(report, "torch.nccl_version", nccl_text(nccl_module.version()))


def probe_tensorflow(report: dict[str, dict[str, Any]], emit: Callable[[dict[str, Any]], None]) -> None:
    if not present(report, "tensorflow", TENSORFLOW_FACTS):
        return
    emit({"step": "import tensorflow"})
    try:
        import tensorflow as tf
    except BaseException as exc:
        miss_all(report, TENSORFLOW_FACTS, "import tensorflow failed: " + describe(exc))
        return

    attempt(report, ["tensorflow.version"], lambda: put(report, "tensorflow.version", str(tf.__version__)))

    def build() -> None:
        info = dict(tf.sysconfig.get_build_info())
        put(report, "tensorflow.is_cuda_build", bool(info.get("is_cuda_build", False)))
        for key in ("cuda", "cudnn"):
            value = info.get(key + "_version")
            put(report, f"tensorflow.{key}_build", None if value is None else str(value))

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


PACKAGE_FACTS = [
    "framework.sys_path", "framework.pythonpath", "framework.conda_prefix", "framework.install_paths",
    "framework.distribution_count", "framework.companion_count", "torch.requires",
    "framework.cuda_toolkit_requires", "framework.library_variables",
]  # fmt: skip
LIBRARY_FACTS = ["framework.cuda_library_count"]


def probe_packages(report: dict[str, dict[str, Any]], config: dict[str, Any]) -> dict[str, list[Installed]]:
    """``dist[i]`` and ``companion[i]``: the copy ``sys.path`` resolves and those it shadows; torch's pins."""
    put(report, "framework.sys_path", list(sys.path))
    put(report, "framework.pythonpath", os.environ.get("PYTHONPATH"))
    conda = os.path.isdir(os.path.join(sys.prefix, "conda-meta"))
    put(report, "framework.conda_prefix", sys.prefix if conda else None)
    # the variables that pick one of a package's per-CUDA libraries (BNB_CUDA_VERSION)
    variables = {name: os.environ.get(name) for name in config.get("library_variables", ())}
    put(report, "framework.library_variables", variables)
    attempt(report, ["framework.install_paths"], functools.partial(put_install_paths, report))
    names = set(config.get("distributions", ()))
    prefixes = tuple(config.get("distribution_prefixes", ()))
    companions = dict(config.get("companions", {}))
    found = installed(sys.path, lambda n: n in names or n.startswith(prefixes) or n in companions)
    dists = [name for name in sorted(found) if name not in companions]
    for index, name in enumerate(dists):
        put_copies(report, f"dist[{index}]", found[name])
    put(report, "framework.distribution_count", len(dists))
    shared = [f"dist[{index}].shares_files" for index in range(len(dists))]
    attempt(report, shared, functools.partial(put_shared_files, report, [found[name][0] for name in dists]))
    paired = [name for name in sorted(found) if name in companions]
    for index, name in enumerate(paired):
        base = f"companion[{index}]"
        put_copies(report, base, found[name])
        first = found[name][0]
        requires = metadata_field(first.metadata, "Requires-Dist")
        put(report, base + ".requires_torch", [r for r in requires if requirement_name(r) == "torch"])
        attempt(report, [base + ".build"], functools.partial(put_build, report, base, first, companions[name]))
    put(report, "framework.companion_count", len(paired))

    def pins(owner: str, fact: str) -> None:
        if owner not in found:
            put(report, fact, None)  # not installed: nothing is pinned
            return
        requires = metadata_field(found[owner][0].metadata, "Requires-Dist")
        named = [(r, requirement_name(r) or "") for r in requires]
        put(report, fact, [r for r, name in named if name in names or name.startswith(prefixes)])

    for owner, fact in (("torch", "torch.requires"), ("cuda-toolkit", "framework.cuda_toolkit_requires")):
        attempt(report, [fact], functools.partial(pins, owner, fact))
    return found


def put_install_paths(report: dict[str, dict[str, Any]]) -> None:
    """Where ``pip install`` puts packages (``purelib``, ``platlib``) and ``--user`` does."""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    where = {"purelib": paths.get("purelib"), "platlib": paths.get("platlib"), "user": user}
    put(report, "framework.install_paths", where)


def put_copies(report: dict[str, dict[str, Any]], base: str, copies: list[Installed]) -> None:
    first = copies[0]
    put(report, base + ".name", first.name)
    put(report, base + ".version", first.version)
    put(report, base + ".location", first.location)
    put(report, base + ".shadowed", [{"version": c.version, "location": c.location} for c in copies[1:]])


#: Files named per pair of distributions that list the same one (the count says how many).
SHARED_SHOWN = 5


def put_shared_files(report: dict[str, dict[str, Any]], dists: list[Installed]) -> None:
    """``dist[i].shares_files``: the shared objects that another distribution in the same folder
    lists in its RECORD too (a wheel of another CUDA family unpacked over this one's files: pip
    sees no conflict, and uninstalling either deletes the file both list)."""
    listed: dict[tuple[str, str], list[str]] = {}
    for dist in dists:
        home = os.path.realpath(dist.location or ".")
        for relative in record_files(dist):
            if ".so" in relative:
                listed.setdefault((home, os.path.normpath(relative)), []).append(dist.name)
    for index, dist in enumerate(dists):
        others: dict[str, list[str]] = {}
        for (_home, relative), names in listed.items():
            if dist.name in names and len(names) > 1:
                for other in names:
                    if other != dist.name:
                        others.setdefault(other, []).append(relative)
        shares = [{"name": o, "files": sorted(f)[:SHARED_SHOWN], "count": len(f)} for o, f in sorted(others.items())]
        put(report, f"dist[{index}].shares_files", shares)


def put_build(report: dict[str, dict[str, Any]], base: str, dist: Installed, package: str) -> None:
    put(report, base + ".build", build_files(dist, package))


def probe_loaded(report: dict[str, dict[str, Any]], found: dict[str, list[Installed]]) -> None:
    """``cudalib[i]``: every CUDA library mapped now, with the distribution that owns its file."""
    libraries = loaded_libraries(read_maps())
    paths = [library["path"] for library in libraries]
    owned = owners([copy for copies in found.values() for copy in copies], paths)
    if any(path not in owned for path in paths):  # not a CUDA wheel's: torch's own, or another one's
        everything = installed(sys.path, lambda name: True)
        owned.update(owners([copy for copies in everything.values() for copy in copies], paths))
    for index, library in enumerate(libraries):
        base = f"cudalib[{index}]"
        owner = owned.get(library["path"])
        for key in ("library", "file", "path", "soname", "version", "version_source", "problems"):
            put(report, f"{base}.{key}", library[key])
        put(report, base + ".distribution", owner.name if owner else None)
        put(report, base + ".distribution_version", owner.version if owner else None)
        put(report, base + ".distribution_location", owner.location if owner else None)
        if library["version"] is None and owner is not None:
            put(report, base + ".version", owner.version)
            put(report, base + ".version_source", "distribution")
    put(report, "framework.cuda_library_count", len(libraries))


def collect(emit: Callable[[dict[str, Any]], None], config: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    report = new_report()
    put(report, "framework.python", sys.executable)
    put(report, "framework.python_version", platform.python_version())
    found: dict[str, list[Installed]] = {}

    def packages() -> None:
        emit({"step": "read distributions"})
        found.update(probe_packages(report, config or {}))

    def libraries() -> None:
        emit({"step": "read loaded libraries"})
        probe_loaded(report, found)

    # The libraries are read after torch initialised CUDA, and before TensorFlow loads its own.
    steps = (
        (packages, PACKAGE_FACTS),
        (functools.partial(probe_torch, report, emit), ["torch.installed", *TORCH_FACTS]),
        (libraries, LIBRARY_FACTS),
        (functools.partial(probe_tensorflow, report, emit), ["tensorflow.installed", *TENSORFLOW_FACTS]),
    )
    for step, names in steps:
        attempt(report, names, step)
    return report


def paths_record() -> dict[str, Any]:
    """sys.path and the standard library's folders, for the parent's fatbin scan."""
    import sysconfig

    paths = sysconfig.get_paths()
    return {"paths": {"sys_path": list(sys.path), "stdlib": [paths.get("stdlib"), paths.get("platstdlib")]}}


def main() -> None:
    records_fd, emit = open_records()
    emit(paths_record())
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    emit(collect(emit, config))
    sys.stderr.flush()
    status = 0
    if config.get("then") == "wait":  # for the smoke steps, once the read-only probes are done

        def one_script(order: dict[str, Any]) -> bool:
            run_order(order, records_fd)
            return False  # this child ends after it

        status = serve(one_script)
    end(status)


if __name__ == "__main__":
    main()

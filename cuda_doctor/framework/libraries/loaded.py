"""Where each CUDA library the framework process mapped came from, against torch's pins, and the
command that takes a wrong copy out of its path variable."""

from __future__ import annotations

import os

from cuda_doctor.core.facts import Facts
from cuda_doctor.framework.libraries.common import (
    Pin,
    compare_versions,
    in_variable,
    library_pin,
    missing,
    pinned_version,
    pip_install,
    satisfies,
    torch_pins,
    without_entry,
)

#: A libcuda in such a folder is NVIDIA's forward-compatibility package (/usr/local/cuda-X.Y/compat).
COMPAT_FOLDER = "compat"
RELATIONS = {
    "same": "the pinned version {wanted}",
    "older": "older than the pinned {wanted}",
    "newer": "newer than the pinned {wanted}",
    "major_differs": "of another major version than the pinned {wanted}",
    "unknown": "a version that could not be compared with the pin",
}
#: Where each origin but "wheel" is, in words.
ORIGINS = {
    "driver": "the NVIDIA driver",
    "compat": "the CUDA forward-compatibility package",
    "LD_LIBRARY_PATH": "a folder on LD_LIBRARY_PATH",
    "conda": "the conda environment",
    "system": "a system folder",
}


def is_compat(path: str) -> bool:
    return os.path.basename(os.path.dirname(path)) == COMPAT_FOLDER


#: torch's check of the loaded cuDNN (torch/backends/cudnn/__init__.py, ``_init``) raises this.
CUDNN_REFUSED = "cuDNN version incompatibility"


def derive(facts: Facts) -> None:
    _cudnn_check(facts)
    if missing(facts, "framework.cuda_library_count", "derived.libcuda.loaded"):
        return
    pins = torch_pins(facts) if facts.has("torch.requires") else {}
    seen: dict[str, str] = {}
    for name in ("path", "folder", "version", "compat", "path_command"):
        facts.set(f"derived.libcuda.{name}", None)
    facts.set("derived.libcuda.loaded", False)
    for index in facts.indices("cudalib"):
        key = str(facts.get(f"cudalib[{index}].library"))
        path = str(facts.get(f"cudalib[{index}].path"))
        facts.set(f"derived.cudalib[{index}].other_copy", seen[key] if seen.get(key, path) != path else None)
        seen.setdefault(key, path)
        _judge(facts, index, key, path, pins)
        if key == "cuda" and not facts.get("derived.libcuda.loaded"):
            _libcuda(facts, index, path)
    # torch calls the first libcudnn the process mapped: that copy is the one it refused
    refused = facts.get("derived.cudnn.refused") is True
    first = next((i for i in facts.indices("cudalib") if facts.get(f"cudalib[{i}].library") == "cudnn"), None)
    for index in facts.indices("cudalib"):
        facts.set(f"derived.cudalib[{index}].torch_refuses", refused and index == first)


def _judge(facts: Facts, index: int, key: str, path: str, pins: dict[str, Pin]) -> None:
    base = f"derived.cudalib[{index}]"
    owner = facts.get(f"cudalib[{index}].distribution")
    folder = os.path.dirname(path)
    ld_path = facts.get("env.ld_library_path")
    pin = library_pin(pins, key)
    origin = _origin(facts, key, path, owner, folder, ld_path)
    facts.set(base + ".origin", origin)
    facts.set(base + ".pin", pin.requirement if pin else None)
    if key == "cuda":
        status = origin  # the driver's library: torch pins none; the driver rules judge it
    elif pin is None:
        status = "unpinned"
    elif owner == pin.name:
        meets = satisfies(facts.get(f"cudalib[{index}].distribution_version"), pin.specifier)
        status = "pinned" if meets else "pin_mismatch"
    else:
        status = "elsewhere"
    facts.set(base + ".status", status)
    wanted = pinned_version(pin.specifier) if pin else None
    facts.set(base + ".pinned_version", wanted)
    relation = compare_versions(facts.get(f"cudalib[{index}].version"), wanted)
    facts.set(base + ".relation", relation)
    facts.set(base + ".relation_text", RELATIONS.get(relation, "").format(wanted=wanted))
    wheel = f"the {owner} {facts.get(f'cudalib[{index}].distribution_version')} wheel"
    facts.set(base + ".origin_text", wheel if origin == "wheel" else ORIGINS[origin])
    variable, entry = _variable(facts, origin, folder, owner, index)
    facts.set(base + ".variable", variable)
    value = ld_path if variable == "LD_LIBRARY_PATH" else facts.get("framework.pythonpath")
    facts.set(base + ".path_command", without_entry(variable, value, entry) if variable and entry else None)
    # the exact pin, installed over whatever copy site-packages holds now
    facts.set(base + ".pin_install_command", pip_install(facts, pin.requirement) if pin else None)


def _cudnn_check(facts: Facts) -> None:
    """``derived.cudnn.*``: whether torch refused the cuDNN it loaded, as its own check said
    ("cuDNN version incompatibility": another major, or an older minor than it was compiled
    against), with both versions; a verdict only where the check was seen to fail."""
    error = facts.get("torch.cudnn_error") if facts.has("torch.cudnn_error") else None
    refused = isinstance(error, str) and CUDNN_REFUSED in error
    facts.set("derived.cudnn.refused", refused)
    compiled, runtime = facts.get("torch.cudnn_compiled"), facts.get("torch.cudnn_runtime")
    facts.set("derived.cudnn.compiled", compiled)
    facts.set("derived.cudnn.runtime", runtime)
    parts = str(compiled).split(".") if compiled else []
    needs = "the cuDNN it was built with"
    if len(parts) >= 2 and parts[0].isdigit():  # cuDNN 7 on: the same major, a minor at least as high
        same = int(parts[0]) < 7 or facts.get("torch.hip_build")
        needs = f"cuDNN {parts[0]}.{parts[1]}" + ("" if same else f" or a newer {parts[0]}.x")
    facts.set("derived.cudnn.needs", needs)
    facts.set("derived.cudnn.error_text", str(error).split(". ", 1)[0] if refused else None)


def _origin(facts: Facts, key: str, path: str, owner: object, folder: str, ld_path: object) -> str:
    if key == "cuda":
        return "compat" if is_compat(path) else "driver"
    if owner:
        return "wheel"
    if in_variable(ld_path, folder):
        return "LD_LIBRARY_PATH"
    conda = facts.get("framework.conda_prefix")
    if isinstance(conda, str) and path.startswith(conda.rstrip("/") + "/"):
        return "conda"
    return "system"


def _variable(facts: Facts, origin: str, folder: str, owner: object, index: int) -> tuple[str | None, str | None]:
    """The path variable that put this copy first, and the entry in it."""
    if origin in ("LD_LIBRARY_PATH", "compat") and in_variable(facts.get("env.ld_library_path"), folder):
        return "LD_LIBRARY_PATH", folder
    location = facts.get(f"cudalib[{index}].distribution_location")
    if owner and isinstance(location, str) and in_variable(facts.get("framework.pythonpath"), location):
        return "PYTHONPATH", location
    return None, None


def _libcuda(facts: Facts, index: int, path: str) -> None:
    facts.set("derived.libcuda.loaded", True)
    facts.set("derived.libcuda.path", path)
    facts.set("derived.libcuda.folder", os.path.dirname(path))
    facts.set("derived.libcuda.version", facts.get(f"cudalib[{index}].version"))
    facts.set("derived.libcuda.compat", is_compat(path))
    facts.set("derived.libcuda.path_command", facts.get(f"derived.cudalib[{index}].path_command"))

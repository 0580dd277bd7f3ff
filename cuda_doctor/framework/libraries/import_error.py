"""Why ``import torch`` failed (an undefined symbol, a missing CUDA library or torch's own), the
library to blame and the command that fixes it."""

from __future__ import annotations

import re

from cuda_doctor.base.childside.loaded import cuda_library_key
from cuda_doctor.core.facts import Facts
from cuda_doctor.framework.libraries.common import (
    index_option,
    library_pin,
    missing,
    pip_install,
    torch_pins,
    torch_version,
)

UNDEFINED = re.compile(
    r"(?P<library>[^\s:]+\.so[.\d]*): undefined symbol: (?P<symbol>[^,\s]+)(?:, version (?P<needs>\S+))?"
)
MISSING = re.compile(r"(?P<library>lib[\w.+-]*?\.so[.\d]*): cannot open shared object file")
#: torch's own libraries (torch/lib): when one is missing, torch's installation is broken.
TORCH_LIBRARIES = re.compile(r"^lib(c10|torch|shm|caffe2_nvrtc)(_\w+)?\.so")
#: A C symbol's prefix names its library when the error gives no version tag ("undefined symbol:
#: ncclCommWindowRegister"): NVIDIA's libraries prefix every exported function with their name.
SYMBOL_PREFIXES = (
    ("nccl", "nccl"), ("cudnn", "cudnn"), ("cublasLt", "cublasLt"), ("cublas", "cublas"),
    ("__nvJitLink", "nvJitLink"), ("nvJitLink", "nvJitLink"), ("cusparseLt", "cusparseLt"),
    ("cusparse", "cusparse"), ("cufft", "cufft"), ("curand", "curand"), ("cusolverMg", "cusolverMg"),
    ("cusolver", "cusolver"), ("nvrtc", "nvrtc"), ("cupti", "cupti"), ("nvshmem", "nvshmem_host"),
    ("cuFile", "cufile"),
)  # fmt: skip
_RUNTIME_SYMBOL = re.compile(r"^cuda[A-Z]")  # cudaMalloc…: the CUDA runtime (cuMemAlloc… is the driver's)
OUT = "derived.torch_import.cause"
#: Set (None where they do not apply) whenever the cause is known, so that rules can test them.
DETAILS = (
    "library", "symbol", "needs", "culprit_path", "culprit_origin", "path_command", "pin", "install_command",
    "installed_at", "provider",
)  # fmt: skip


def derive(facts: Facts) -> None:
    if missing(facts, "torch.import_error", OUT):
        return
    text = facts.get("torch.import_error")
    if not text:
        facts.set(OUT, None)
        return
    for name in DETAILS:
        facts.set(f"derived.torch_import.{name}", None)
    undefined = UNDEFINED.search(str(text))
    cannot_open = MISSING.search(str(text))
    if undefined:
        _undefined(facts, undefined)
    elif cannot_open and TORCH_LIBRARIES.match(cannot_open.group("library")):
        _torch_incomplete(facts, cannot_open.group("library"))
    elif cannot_open:
        _missing(facts, cannot_open.group("library"))
    else:
        facts.set(OUT, "other")


def _undefined(facts: Facts, match: re.Match[str]) -> None:
    facts.set(OUT, "undefined_symbol")
    library = match.group("library").rsplit("/", 1)[-1]
    needs = match.group("needs")
    symbol = match.group("symbol")
    facts.set("derived.torch_import.library", library)
    facts.set("derived.torch_import.symbol", symbol)
    facts.set("derived.torch_import.needs", needs)
    key = cuda_library_key(needs) if needs else symbol_library(symbol)
    culprit = next((i for i in facts.indices("cudalib") if facts.get(f"cudalib[{i}].library") == key), None)
    # what to call the library that lacks the symbol: the version tag's, else the loaded copy's file
    provider = needs or (facts.get(f"cudalib[{culprit}].file") if culprit is not None else None)
    facts.set("derived.torch_import.provider", str(provider) if provider else "the library that should define it")
    if culprit is not None:
        facts.set("derived.torch_import.culprit_path", facts.get(f"cudalib[{culprit}].path"))
        facts.set("derived.torch_import.culprit_origin", facts.get(f"derived.cudalib[{culprit}].origin_text"))
        facts.set("derived.torch_import.path_command", facts.get(f"derived.cudalib[{culprit}].path_command"))
    _pinned_install(facts, key)


def symbol_library(symbol: str) -> str | None:
    """The CUDA library (its key) a plain C symbol belongs to, by its prefix; None if none says."""
    if _RUNTIME_SYMBOL.match(symbol):
        return "cudart"
    return next((key for prefix, key in SYMBOL_PREFIXES if symbol.startswith(prefix)), None)


def _missing(facts: Facts, library: str) -> None:
    facts.set(OUT, "missing_library")
    facts.set("derived.torch_import.library", library)
    key = cuda_library_key(library)
    pin = _pinned_install(facts, key)
    dists = [i for i in facts.indices("dist") if pin is not None and facts.get(f"dist[{i}].name") == pin]
    facts.set("derived.torch_import.installed_at", facts.get(f"dist[{dists[-1]}].location") if dists else None)


def _pinned_install(facts: Facts, key: str | None) -> str | None:
    """The pinned distribution of library ``key`` and the command that installs it."""
    pin = library_pin(torch_pins(facts) if facts.has("torch.requires") else {}, key)
    facts.set("derived.torch_import.pin", pin.requirement if pin else None)
    facts.set("derived.torch_import.install_command", pip_install(facts, pin.requirement) if pin else None)
    return pin.name if pin else None


def _torch_incomplete(facts: Facts, library: str) -> None:
    facts.set(OUT, "torch_incomplete")
    facts.set("derived.torch_import.library", library)
    version = torch_version(facts)
    index = index_option(facts)
    if version and index is not None:
        options = "--force-reinstall --no-deps" + (f" {index}" if index else "")
        command = pip_install(facts, f"torch=={version.split('+')[0]}", options=options)
        facts.set("derived.torch_import.install_command", command)

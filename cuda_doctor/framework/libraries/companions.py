"""torch's companion packages (torchvision, xformers, flash-attn, …): made for this torch, and
built for its CUDA?"""

from __future__ import annotations

import json
import re
from typing import Any

from cuda_doctor.core.facts import Facts
from cuda_doctor.framework.libraries.common import (
    index_option,
    marker_environment,
    pip_install,
    requirements,
    satisfies,
    torch_version,
)
from cuda_doctor.tables import load_table
from cuda_doctor.tables.versions import release_of


def derive(facts: Facts) -> None:
    companions = {row["name"]: row for row in load_table("companions")["companion"]}
    for index in facts.indices("companion"):
        name = str(facts.get(f"companion[{index}].name"))
        _pairing(facts, index, name, companions.get(name, {}))
        _build(facts, index, name, companions.get(name, {}))


def torch_pin(facts: Facts, index: int) -> str | None:
    """The specifier of the companion's ``Requires-Dist`` on torch ("" when it names torch bare)."""
    env = marker_environment(facts)
    for req in requirements(facts.get(f"companion[{index}].requires_torch")):
        if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
            return str(req.specifier)
    return None


def _pairing(facts: Facts, index: int, name: str, row: dict[str, Any]) -> None:
    base = f"derived.companion[{index}]"
    torch = torch_version(facts)
    torch_minor = release_of(torch)
    facts.set(base + ".torch", torch)
    spec = torch_pin(facts, index)
    facts.set(base + ".torch_pin", spec or None)
    facts.set(base + ".pin_ok", satisfies(torch, spec) if spec and torch else None)
    version = str(facts.get(f"companion[{index}].version"))
    rows = load_table("companions").get("unpinned", [])
    unpinned = next((r for r in rows if (r["name"], r["version"]) == (name, version)), None)
    made_for = str(unpinned["made_for"]) if unpinned and not spec else None
    facts.set(base + ".made_for", made_for)
    facts.set(base + ".made_for_differs", bool(made_for and torch_minor and made_for != torch_minor))
    series = next((r for r in load_table("companions")["series"] if str(r["torch"]) == torch_minor), None)
    wanted = series.get(name) if series else None
    facts.set(base + ".suggested", f"{name}=={wanted}.*" if wanted else None)
    options = index_option(facts) if row.get("pytorch_index") else ""
    command = pip_install(facts, f"{name}=={wanted}.*", options=options) if wanted and options is not None else None
    facts.set(base + ".install_command", command)
    facts.set(base + ".torch_minor", torch_minor)


def _build(facts: Facts, index: int, name: str, row: dict[str, Any]) -> None:
    base = f"derived.companion[{index}]"
    cuda, source, built_for = build_cuda(facts.get(f"companion[{index}].build") or {})
    files = [f for f in facts.get("fatbin.files") or [] if isinstance(f, dict) and f.get("distribution") == name]
    linked = sorted({int(f["cudart"]) for f in files if isinstance(f.get("cudart"), int)})
    if cuda is None and linked:
        cuda, source = str(linked[0]), "the libcudart.so it needs"
    facts.set(base + ".build_cuda", cuda)
    facts.set(base + ".build_cuda_source", source)
    facts.set(base + ".built_for_torch", built_for)
    torch_minor = release_of(torch_version(facts))
    facts.set(base + ".built_for_differs", bool(built_for and torch_minor and built_for != torch_minor))
    facts.set(base + ".checks_cuda_major", bool(row.get("checks_cuda_major")))
    facts.set(base + ".needs_c10_cuda", any(f.get("c10_cuda") for f in files))
    facts.set(base + ".cuda_relation", _relation(facts, cuda))
    build = facts.get("torch.cuda_build")
    facts.set(base + ".torch_cuda", f"CUDA {build}" if build else "CPU-only" if facts.has("torch.cuda_build") else None)
    options = index_option(facts) if row.get("pytorch_index") else None
    version = str(facts.get(f"companion[{index}].version")).split("+")[0]
    reinstall = "--force-reinstall --no-deps" + (f" {options}" if options else "")
    command = pip_install(facts, f"{name}=={version}", options=reinstall) if options is not None else None
    facts.set(base + ".reinstall_command", command)


def _relation(facts: Facts, cuda: str | None) -> str:
    if not facts.has("torch.cuda_build") or cuda is None:
        return "unknown"
    torch_cuda = facts.get("torch.cuda_build")
    if cuda == "cpu":
        return "same" if torch_cuda is None else "cpu_on_cuda_torch"
    if torch_cuda is None:
        return "cuda_on_cpu_torch"
    return "same" if cuda.split(".")[0] == str(torch_cuda).split(".")[0] else "major_differs"


def build_cuda(build: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(CUDA version or "cpu", where it was read, the torch minor it was built for) from build files."""
    version_py = str(build.get("version.py") or "")
    cuda = re.search(r"^cuda\s*=\s*['\"]([0-9.]+)['\"]", version_py, re.M)
    if cuda:
        return cuda.group(1), "version.py", None
    label = re.search(r"^__version__\s*=\s*['\"][^'\"+]*\+(cpu|cu\d+)['\"]", version_py, re.M)
    if label:
        return _label_cuda(label.group(1)), "version.py", None
    try:
        info = json.loads(str(build.get("cpp_lib.json") or "null"))
    except (ValueError, RecursionError):  # a package's file: anything may be in it
        info = None
    if isinstance(info, dict) and isinstance(info.get("version"), dict):
        code, torch = info["version"].get("cuda"), info["version"].get("torch")
        # xformers writes the CUDA version as major*100+minor: 1208 is 12.8
        cuda_text = f"{code // 100}.{code % 100}" if isinstance(code, int) and code else None
        return cuda_text, "cpp_lib.json", release_of(torch)
    try:
        direct = json.loads(str(build.get("direct_url.json") or "null"))
    except (ValueError, RecursionError):
        direct = None
    url = str(direct.get("url", "")) if isinstance(direct, dict) else ""
    wheel = re.search(r"\+cu(\d+)torch(\d+\.\d+)", url)
    if wheel:
        return _label_cuda("cu" + wheel.group(1)), "the wheel's file name", wheel.group(2)
    return None, None, None


def _label_cuda(label: str) -> str:
    """cu130 → 13.0, cu12 → 12 (flash-attn names the major alone), cpu → cpu."""
    if label == "cpu":
        return "cpu"
    digits = label[2:]
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 3 else digits

"""The fatbin scan judged per GPU (no code it runs; only PTX newer than the driver compiles), and
the CUDA linkage of compiled extensions against torch's."""

from __future__ import annotations

import os
import re
from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.framework.libraries.common import missing
from cuda_doctor.framework.libraries.variants import not_loaded
from cuda_doctor.tables import load_table
from cuda_doctor.tables.versions import major_minor
from cuda_doctor.tables.wheels import arch_support

#: Files named in one message at most (the count says how many there are).
SHOWN = 8


def derive(facts: Facts) -> None:
    files = facts.get("fatbin.files")
    outs = [f"derived.gpu[{i}].{name}" for i in facts.indices("gpu") for name in ("kernels_missing", "ptx_too_new")]
    if missing(facts, "fatbin.files", *outs, "derived.extensions.c10_cuda_on_cpu") or not isinstance(files, list):
        return
    roots = [str(r) for r in facts.get("fatbin.site_dirs") or []]
    listed = [f for f in files if isinstance(f, dict) and isinstance(f.get("path"), str)]
    # one library per CUDA version (bitsandbytes): only the one its loader picks is judged
    unloaded, unsure = not_loaded(facts, listed)
    loaded = [f for f in listed if f["path"] not in unloaded]
    facts.set("derived.fatbin.not_loaded", [describe(f, roots) for f in listed if f["path"] in unloaded][:SHOWN])
    facts.set("derived.fatbin.not_loaded_count", len(unloaded))
    facts.set("derived.fatbin.variants_unknown", unsure)
    coded = [f for f in loaded if _judged(f)]
    facts.set("derived.fatbin.device_code_files", len(coded))
    for index in facts.indices("gpu"):
        _per_gpu(facts, index, coded, roots)
    _linkage(facts, loaded, roots)


def _judged(item: dict[str, Any]) -> bool:
    """A file with device code, not of NVIDIA's wheels (they keep some outside ``.nv_fatbin``)."""
    code = item.get("sass") or item.get("sass_specific") or item.get("ptx")
    return bool(code) and not str(item.get("distribution") or "").startswith("nvidia-")


def describe(item: dict[str, Any], roots: list[str], gpu_code: str = "") -> str:
    """``flash-attn 2.8.3: flash_attn_2_cuda….so (has sm_80, sm_90)``."""
    path = str(item["path"])
    shown = next((os.path.relpath(path, r) for r in roots if path.startswith(r.rstrip("/") + "/")), path)
    owner = f"{item['distribution']} {item.get('distribution_version')}: " if item.get("distribution") else ""
    return f"{owner}{shown}{f' ({gpu_code})' if gpu_code else ''}"


def _sass(item: dict[str, Any]) -> list[str]:
    return [f"sm_{a}" for a in item.get("sass", [])] + [f"sm_{a}a" for a in item.get("sass_specific", [])]


def has_text(item: dict[str, Any]) -> str:
    code = _sass(item) + [f"PTX {version} for sm_{arch}" for arch, version in item.get("ptx", [])]
    return "has " + ", ".join(code) if code else "no device code"


def _arch_list(item: dict[str, Any]) -> list[str]:
    """The file's device code in the spelling of ``wheels.arch_support``."""
    return _sass(item) + [f"compute_{arch}" for arch, _ in item.get("ptx", [])]


def ptx_needs(isa: str) -> tuple[str | None, bool]:
    """The first CUDA release that compiles PTX ISA ``isa``, and whether the table row is verified."""
    row = next((r for r in load_table("ptx_isa")["isa"] if r["ptx"] == isa), None)
    return (str(row["cuda"]), bool(row.get("verified"))) if row else (None, False)


def _per_gpu(facts: Facts, index: int, coded: list[dict[str, Any]], roots: list[str]) -> None:
    base = f"derived.gpu[{index}]"
    capability = facts.get(indexed("gpu", index, "compute_capability"))
    cc = major_minor(capability)
    if cc is None:
        reason = facts.reason(indexed("gpu", index, "compute_capability")) or "its compute capability is unknown"
        facts.mark_all_unknown((base + ".kernels_missing", base + ".ptx_too_new"), reason)
        return
    driver_cuda = major_minor(facts.get("driver.cuda_version"))
    missing: list[str] = []
    too_new: list[str] = []
    unverified: list[str] = []
    jit = 0
    for item in coded:
        support = arch_support(str(capability), _arch_list(item))
        if support == "none":
            missing.append(describe(item, roots, has_text(item)))
        elif support == "ptx":
            jit += 1
            needs = _ptx_floor(item, cc)
            if needs and driver_cuda and needs[0] and (major_minor(needs[0]) or (0, 0)) > driver_cuda:
                text = describe(item, roots, f"PTX needs a CUDA {needs[0]} driver")
                (too_new if needs[1] else unverified).append(text)
    if not missing and not facts.get("fatbin.complete"):
        reason = f"the scan is incomplete: {facts.get('fatbin.incomplete_reason')}"
        facts.mark_unknown(base + ".kernels_missing", reason)
    else:
        facts.set(base + ".kernels_missing", missing[:SHOWN])
        facts.set(base + ".kernels_missing_count", len(missing))
    facts.set(base + ".ptx_too_new", too_new[:SHOWN])
    facts.set(base + ".ptx_unverified", unverified[:SHOWN])
    facts.set(base + ".ptx_jit_count", jit)
    facts.set(base + ".device_code_files", len(coded))
    facts.set(base + ".arch_list_hint", f"{cc[0]}.{cc[1]}")


def _ptx_floor(item: dict[str, Any], cc: tuple[int, int]) -> tuple[str | None, bool] | None:
    """The least CUDA version among the PTX entries that this GPU can JIT (arch ≤ its SM)."""
    sm = cc[0] * 10 + cc[1]
    best: tuple[tuple[int, int], str, bool] | None = None
    for arch, isa in item.get("ptx", []):
        if int(arch) > sm:
            continue
        cuda, verified = ptx_needs(str(isa))
        parsed = major_minor(cuda) if cuda else None
        if parsed is None:
            return None  # an ISA the table does not know: no claim either way
        if best is None or parsed < best[0]:
            best = (parsed, str(cuda), verified)
    return (best[1], best[2]) if best else None


def _linkage(facts: Facts, files: list[dict[str, Any]], roots: list[str]) -> None:
    companions = {row["name"] for row in load_table("companions")["companion"]}
    torch_build = facts.get("torch.cuda_build")
    cpu_torch = facts.has("torch.cuda_build") and torch_build is None and not facts.get("torch.hip_build")
    theirs = [f for f in files if f.get("distribution") not in companions and f.get("distribution") != "torch"]
    if missing(facts, "torch.cuda_build", "derived.extensions.c10_cuda_on_cpu"):
        return
    c10 = [describe(f, roots) for f in theirs if f.get("c10_cuda")] if cpu_torch else []
    facts.set("derived.extensions.c10_cuda_on_cpu", c10[:SHOWN])
    facts.set("derived.extensions.c10_cuda_on_cpu_count", len(c10))
    major = re.match(r"^(\d+)", str(torch_build)) if torch_build else None
    differs = []
    if major:
        for item in theirs:
            linked = item.get("cudart")
            if item.get("torch") and isinstance(linked, int) and linked != int(major.group(1)):
                differs.append(describe(item, roots, f"needs libcudart.so.{linked}"))
    facts.set("derived.extensions.cudart_differs", differs[:SHOWN])
    facts.set("derived.extensions.cudart_differs_count", len(differs))

"""CUDA's initialisation explained: the error code's cause and fix, whether a GPU can use a
forward-compatibility libcuda, and driver versions that differ from the kernel module's."""

from __future__ import annotations

import re
from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.framework.libraries.common import missing
from cuda_doctor.tables import load_table

_CODE = re.compile(r"\b[Ee]rror (\d{1,4})\b")
_TOO_OLD = "The NVIDIA driver on your system is too old"


def derive(facts: Facts) -> None:
    _init_error(facts)
    _forward_compat(facts)
    _module(facts)


def find_error(text: str | None, name: str | None = None) -> dict[str, Any] | None:
    """The table row of the error a text or a ``CUDA_ERROR_*`` name means."""
    rows = [dict(row) for row in load_table("cuda_errors")["error"]]
    if name:
        row = next((r for r in rows if name in (r.get("driver"), r.get("runtime"))), None)
        if row is not None:
            return row
    if not text:
        return None
    match = _CODE.search(text)
    if match:
        row = next((r for r in rows if r["code"] == int(match.group(1))), None)
        if row is not None:
            return row
    if _TOO_OLD in text:
        return next((r for r in rows if r["code"] == 35), None)
    return next((r for r in rows if r.get("text") and str(r["text"]).rstrip(".") in text), None)


def _init_error(facts: Facts) -> None:
    out = "derived.cuda_init.code"
    torch_error = facts.get("torch.cuda_error")
    smoke_name = facts.get("smoke.driver_level.error_name")
    row = find_error(torch_error if isinstance(torch_error, str) else None)
    source = "torch"
    if row is None and isinstance(smoke_name, str):
        row = find_error(facts.get("smoke.driver_level.error"), smoke_name)
        source = "the driver-level smoke run"
    if row is None:
        if facts.has("torch.cuda_error") or facts.has("smoke.driver_level.error_name"):
            facts.set(out, None)
        else:
            missing(facts, "torch.cuda_error", out)
        return
    facts.set(out, row["code"])
    facts.set("derived.cuda_init.name", row.get("runtime") or row.get("driver"))
    facts.set("derived.cuda_init.text", row.get("text"))
    facts.set("derived.cuda_init.cause", row["cause"])
    facts.set("derived.cuda_init.fix", row["fix"])
    facts.set("derived.cuda_init.cause_verified", bool(row.get("cause_verified")))
    facts.set("derived.cuda_init.source", source)


def _forward_compat(facts: Facts) -> None:
    if not facts.get("derived.libcuda.compat"):
        return  # only a loaded compat libcuda asks the question
    table = load_table("cuda_errors")["forward_compat"]
    for index in facts.indices("gpu"):
        brand = facts.get(indexed("gpu", index, "brand"))
        out = f"derived.gpu[{index}].forward_compat"
        if not isinstance(brand, str):
            facts.mark_unknown(out, facts.reason(indexed("gpu", index, "brand")) or "the GPU's brand is unknown")
        else:  # the table lists the brands that never and that sometimes can; the others can
            facts.set(out, next((kind for kind in ("never", "some") if brand in table[kind]), "supported"))


def _module(facts: Facts) -> None:
    out = "derived.driver_module.mismatch"
    module = facts.get("kernel.nvidia_module_version")
    if missing(facts, "kernel.nvidia_module_version", out):
        return
    seen = []
    if facts.get("driver.version"):
        seen.append(("NVML", str(facts.get("driver.version"))))
    if facts.get("derived.libcuda.loaded") and not facts.get("derived.libcuda.compat"):
        version = facts.get("derived.libcuda.version")
        if version:  # a compat libcuda is newer by design: forward compatibility, not a pending reboot
            seen.append((str(facts.get("derived.libcuda.path")), str(version)))
    different = [f"{version} ({where})" for where, version in seen if version != module]
    facts.set(out, bool(different))
    facts.set("derived.driver_module.userspace", ", ".join(different) or None)
    facts.set("derived.driver_module.checked", ", ".join(f"{version} ({where})" for where, version in seen) or None)

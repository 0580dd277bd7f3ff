"""CUDA_VISIBLE_DEVICES: what it really exposes, with CUDA's semantics."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from cuda_doctor.core.facts import Facts, indexed, need


class VisibleDevices(NamedTuple):
    status: str  # unset | empty | ok | duplicate | invalid | hides_all
    visible: int | None  # how many GPUs CUDA exposes; None when unset (all of them)
    problem: str | None = None


def visible_devices(
    raw: str | None, count: object, uuids: list[str], mig_parents: Mapping[str, int] | None = None
) -> VisibleDevices:
    """What CUDA_VISIBLE_DEVICES really exposes: the list stops at the first entry that names no
    GPU, and a GPU listed twice exposes none.  ``mig_parents``: MIG UUID → its GPU's index, or None."""
    if raw is None:
        return VisibleDevices("unset", None)
    if raw.strip() == "":
        return VisibleDevices("empty", 0)
    seen: list[str] = []
    for entry in (e.strip() for e in raw.split(",")):
        resolved = _resolve_device(entry, count, uuids, mig_parents)
        if resolved is None:
            why = f"'{entry}' names no GPU on this machine"
            return VisibleDevices("invalid" if seen else "hides_all", len(seen), why)
        if resolved[0] in seen:
            return VisibleDevices("duplicate", 0, f"'{entry}' is listed twice")
        seen.append(resolved[0])
    return VisibleDevices("ok", len(seen))


def visible_gpus(
    raw: str | None, uuids: list[str], mig_parents: Mapping[str, int] | None = None
) -> tuple[VisibleDevices, list[int | None]]:
    """``visible_devices``, and the index of the GPU behind each device CUDA exposes, in its order (None: unknown)."""
    found = visible_devices(raw, len(uuids), uuids, mig_parents)
    if raw is None:
        return found, list(range(len(uuids)))
    if found.status not in ("ok", "invalid"):
        return found, []
    exposed = [e.strip() for e in raw.split(",")][: found.visible]
    resolved = [_resolve_device(e, len(uuids), uuids, mig_parents) for e in exposed]
    return found, [None if device is None else device[1] for device in resolved]


def derive(facts: Facts) -> None:
    if not need(facts, "derived.cvd.status", "env.cuda_visible_devices"):
        return
    raw = facts.get("env.cuda_visible_devices")
    count = facts.get("gpu.count")
    uuids = [str(facts.get(indexed("gpu", i, "uuid")) or "") for i in facts.indices("gpu")]
    mig = [facts.get(indexed("gpu", i, "mig_enabled")) for i in facts.indices("gpu")]
    no_mig = bool(mig) and all(enabled is False for enabled in mig)  # then no MIG instance exists
    found = visible_devices(None if raw is None else str(raw), count, uuids, {} if no_mig else None)
    facts.set("derived.cvd.status", found.status)
    if found.status == "unset":
        return
    facts.set("derived.cvd.visible", found.visible)
    if found.status == "empty":
        return
    facts.set("derived.cvd.problem", found.problem)
    facts.set("derived.cvd.gpu_count", count)
    # how many GPUs there are to name, in words: also when the count is unknown
    if isinstance(count, int) and not isinstance(count, bool):
        here = f"this machine has {count} GPU{'' if count == 1 else 's'}"
    else:
        here = f"the number of GPUs here is unknown: {facts.unknown_reason('gpu.count')}"
    facts.set("derived.cvd.gpus_here", here)


def _resolve_device(
    entry: str, count: object, uuids: list[str], mig_parents: Mapping[str, int] | None
) -> tuple[str, int | None] | None:
    """(what tells the device an entry names from the others, its GPU's index or None), or None."""
    if re.fullmatch(r"\d+", entry):
        if isinstance(count, int) and int(entry) >= count:
            return None
        return f"#{int(entry)}", int(entry)
    if entry.startswith("MIG-"):
        return _resolve_mig(entry, uuids, mig_parents)
    if entry.startswith("GPU-"):
        matches = [i for i, u in enumerate(uuids) if u and u.startswith(entry)]
        if uuids and len(matches) != 1:
            return None
        return (uuids[matches[0]], matches[0]) if matches else (entry, None)
    return None


def _resolve_mig(entry: str, uuids: list[str], mig_parents: Mapping[str, int] | None) -> tuple[str, int | None] | None:
    if mig_parents is not None:
        matches = [uuid for uuid in mig_parents if uuid.startswith(entry)]
        return (matches[0], mig_parents[matches[0]]) if len(matches) == 1 else None
    if entry.startswith("MIG-GPU-"):  # the R450/R460 form: MIG-GPU-<its GPU's UUID>/<GI>/<CI>
        gpu = _resolve_device(entry[len("MIG-") :].split("/")[0], None, uuids, None)
        return None if gpu is None else (entry, gpu[1])
    return entry, None  # the MIG instances are not listed here: the entry is taken on trust

"""Environment variables that change what a run sees (the ``env.*`` facts; ``None``: not set),
compared between two reports."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cuda_doctor.compare.keys import MISSING
from cuda_doctor.core.reportfile import SavedReport

#: The variables recorded one each, as the fact ``env.<its name in lower case>``.
VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH", "CUDA_HOME")
NCCL_FACT = "env.nccl"


@dataclass(frozen=True)
class EnvChange:
    variable: str  # "CUDA_VISIBLE_DEVICES", "NCCL_P2P_DISABLE"
    before: str | None  # None: not set
    after: str | None
    note: str | None = None  # what the change does, where that can be told ("hides every GPU")
    worse: bool = False


def diff_environment(before: SavedReport, after: SavedReport) -> tuple[EnvChange, ...]:
    """Variables whose value differs; a report that did not record the environment is skipped."""
    changes: list[EnvChange] = []
    for variable in VARIABLES:
        fact = f"env.{variable.lower()}"
        old, new = before.values.get(fact, MISSING), after.values.get(fact, MISSING)
        if old is MISSING or new is MISSING or old == new:
            continue
        if variable == "CUDA_VISIBLE_DEVICES":
            changes.append(_visible_devices_change(before, after, old, new))
        else:
            changes.append(EnvChange(variable, _text(old), _text(new)))
    old_nccl, new_nccl = before.values.get(NCCL_FACT), after.values.get(NCCL_FACT)
    if isinstance(old_nccl, dict) and isinstance(new_nccl, dict):
        for name in sorted(old_nccl.keys() | new_nccl.keys()):
            if old_nccl.get(name) != new_nccl.get(name):
                changes.append(EnvChange(str(name), _text(old_nccl.get(name)), _text(new_nccl.get(name))))
    return tuple(changes)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _visible_devices_change(before: SavedReport, after: SavedReport, old: Any, new: Any) -> EnvChange:
    """A change of CUDA_VISIBLE_DEVICES as CUDA reads it on each report's GPUs: fewer visible after is worse."""
    seen_before, seen_after = _visible(before, old), _visible(after, new)
    change = EnvChange("CUDA_VISIBLE_DEVICES", _text(old), _text(new))
    if seen_after is None:
        return change
    count, why = seen_after
    had = seen_before[0] if seen_before is not None else None
    if count == 0:
        note = "hides every GPU"
    elif had is not None and count < had:
        note = f"{count} of {had} GPUs visible"
    else:
        return change
    return replace(change, note=note + (f" ({why})" if why else ""), worse=had is None or count < had)


def _visible(report: SavedReport, raw: Any) -> tuple[int, str | None] | None:
    """(GPUs CUDA exposes, why fewer) on the report's machine, or None when it cannot be told."""
    from cuda_doctor.gpu.visible_devices import visible_devices

    count = report.values.get("gpu.count")
    if not isinstance(count, int) or isinstance(count, bool):
        return None
    uuids = [str(report.values.get(f"gpu[{i}].uuid") or "") for i in range(count)]
    found = visible_devices(None if raw is None else str(raw), count, uuids)
    if found.status == "unset":
        return count, None
    if found.visible is None:
        return None
    return found.visible, found.problem

"""Derived facts for the NVSwitch fabric rule (CD103): the GPUs on a fabric and those Fabric Manager has
not registered (CUDA then fails with error 802); a GPU not on a fabric, or not reporting one, is not judged."""

from __future__ import annotations

import itertools
import re

from cuda_doctor.core.facts import Facts, indexed

#: The states of a GPU that is part of an NVSwitch fabric (nvmlGpuFabricState_t).
ON_FABRIC = frozenset({"not_started", "in_progress", "completed"})
_OUT = "derived.fabric"
#: From this driver branch on, NVIDIA's Ubuntu packages drop the branch from their names.
_UNVERSIONED_FROM = 590


def on_fabric(facts: Facts, gpu: int) -> bool:
    """GPU ``gpu`` reports an NVSwitch fabric registration of a known state."""
    return facts.get(indexed("gpu", gpu, "fabric_state")) in ON_FABRIC


def spans(numbers: list[int]) -> list[str]:
    """[0, 1, 2, 3, 5] → ["0–3", "5"]: runs of consecutive numbers."""
    out: list[str] = []
    for _, run in itertools.groupby(enumerate(numbers), key=lambda pair: pair[1] - pair[0]):
        first, *rest = (n for _, n in run)
        out.append(f"{first}–{rest[-1]}" if rest else str(first))
    return out


def gpu_spans(indices: list[int]) -> list[str]:
    """[0, …, 7] → ["GPU 0–7"]; [3] → ["GPU 3"]; [0, 1, 5] → ["GPU 0–1", "GPU 5"]."""
    return [f"GPU {span}" for span in spans(indices)]


def no_gpu(facts: Facts, name: str) -> None:
    """``name`` when there is no GPU to judge: "no GPU found", or unknown with why none was read."""
    if facts.get("gpu.count") == 0:
        facts.set(name, "no GPU found")
    else:
        facts.mark_unknown(name, facts.reason("gpu.count") or facts.reason("gpu") or "no GPU was read")


def package(driver: object) -> str:
    """The Fabric Manager package to install for driver ``driver`` ("580.159.04")."""
    match = re.match(r"(\d+)\.", str(driver or ""))
    branch = f"-{match.group(1)}" if match and int(match.group(1)) < _UNVERSIONED_FROM else ""
    rhel = "nvidia-fabric-manager on RHEL-family systems"
    return f"nvidia-fabricmanager{branch} from NVIDIA's repository on Ubuntu and Debian, {rhel}"


def derive(facts: Facts) -> None:
    gpus = facts.indices("gpu")
    if not gpus:
        no_gpu(facts, f"{_OUT}.skip_reason")
        return
    names = {i: indexed("gpu", i, "fabric_state") for i in gpus}
    known = {i: facts.get(name) for i, name in names.items() if facts.has(name)}
    members = [i for i, state in known.items() if state in ON_FABRIC or state == "other"]
    if not members:
        _not_applicable(facts, known, [i for i in gpus if i not in known])
        return
    facts.set(f"{_OUT}.skip_reason", None)
    facts.set(f"{_OUT}.members", gpu_spans(members))
    facts.set(f"{_OUT}.package", package(facts.get("driver.version")))
    facts.set(f"{_OUT}.not_started", gpu_spans([i for i in members if known[i] == "not_started"]))
    facts.set(f"{_OUT}.in_progress", gpu_spans([i for i in members if known[i] == "in_progress"]))
    strange = [i for i in members if known[i] == "other"]
    if strange:  # a state NVML added later: not judged either way
        facts.mark_unknown(f"{_OUT}.failed", f"GPU {strange[0]} reports a fabric state this cuda-doctor does not know")
        return
    completed = {i: facts.get(indexed("gpu", i, "fabric_status")) for i in members if known[i] == "completed"}
    failed = [f"GPU {i}: {status}" for i, status in completed.items() if status not in ("success", None)]
    facts.set(f"{_OUT}.failed", failed)


def _not_applicable(facts: Facts, known: dict[int, object], unread: list[int]) -> None:
    name = f"{_OUT}.skip_reason"
    if unread:
        reason = facts.reason(indexed("gpu", unread[0], "fabric_state"))
        facts.mark_unknown(name, reason or "the GPUs' fabric state was not read")
    elif any(state == "not_supported" for state in known.values()):
        facts.set(name, "no GPU is part of an NVSwitch fabric (fabric state N/A, as on PCIe boards)")
    else:
        facts.set(name, "the driver does not report the GPUs' NVSwitch fabric state")

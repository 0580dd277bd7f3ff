"""A GPU's links to other GPUs, read from an open NVML: ``gpu[i].fabric_state`` and ``fabric_status``
(its NVSwitch fabric registration), ``nvlink_count``, ``nvlink_states`` and ``nvlink_errors`` (the
links with a non-zero replay, recovery or CRC counter; null when the GPU keeps none of these)."""

from __future__ import annotations

from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.gpu.nvml import binding, fields
from cuda_doctor.gpu.nvml.binding import Refusal

#: nvmlGpuFabricState_t (nvidia-ml-py's NVML_GPU_FABRIC_STATE_*).
FABRIC_STATES: dict[int, str] = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
FABRIC_COMPLETED = 3
#: nvmlDeviceGetNvLinkErrorCounter's counters (NVML_NVLINK_ERROR_DL_*).
DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA = 0, 1, 2, 3
INVALID_ARGUMENT = 2
#: The counters each link's fact holds → (its field, the per-link counters that add up to it).
COUNTERS: dict[str, tuple[int, tuple[int, ...]]] = {
    "replay": (fields.NVLINK_REPLAY, (DL_REPLAY,)),
    "recovery": (fields.NVLINK_RECOVERY, (DL_RECOVERY,)),
    "crc": (fields.NVLINK_CRC, (DL_CRC_FLIT, DL_CRC_DATA)),
}
#: More links than any GPU has (NVML_NVLINK_MAX_LINKS is 36).
_MAX_LINKS = 64


def read_fabric(nvml: Any, facts: Facts, index: int, handle: Any) -> None:
    state_name, status_name = indexed("gpu", index, "fabric_state"), indexed("gpu", index, "fabric_status")
    answer = fabric_info(nvml, handle)
    if isinstance(answer, Refusal):
        if answer.not_supported or answer.code == binding.FUNCTION_NOT_FOUND:  # it predates fabrics
            facts.set(state_name, None)
            facts.set(status_name, None)
        else:
            why = f"the GPU's NVSwitch fabric state could not be read: {answer.reason}"
            facts.mark_all_unknown((state_name, status_name), why)
        return
    state, status = answer
    facts.set(state_name, FABRIC_STATES.get(state, "other"))
    facts.set(status_name, status_text(nvml, status) if state == FABRIC_COMPLETED else None)


def fabric_info(nvml: Any, handle: Any) -> tuple[int, int] | Refusal:
    """(state, status) of the GPU's fabric registration, from the versioned call where there is one."""
    import ctypes

    tried: Refusal | None = None
    for function, struct in (
        ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
        ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
    ):
        make = getattr(nvml, struct, None)
        if make is None or not hasattr(nvml, function):
            continue
        info = make()
        answer = binding.ask(nvml, (function,), handle, ctypes.byref(info))
        if isinstance(answer, Refusal):
            if answer.code == binding.FUNCTION_NOT_FOUND:
                tried = answer
                continue  # a driver older than the versioned call
            return answer
        try:
            return int(info.state), int(info.status)
        except (TypeError, ValueError, AttributeError) as exc:
            return Refusal(None, f"NVML {function} answered what could not be read: {exc}")
    return tried or Refusal(None, "this nvidia-ml-py has no nvmlDeviceGetGpuFabricInfo")


def status_text(nvml: Any, code: int) -> str:
    """NVML's return code as the facts show it: ``success``, or NVML's message and the number."""
    if code == binding.SUCCESS:
        return "success"
    return f"{binding.error_text(nvml, code)} ({code})"


def read_nvlinks(nvml: Any, facts: Facts, index: int, handle: Any, count_answer: Any, newest: int = -1) -> None:
    """The NVLink facts of one GPU from its NVLINK_LINK_COUNT field value (``newest``: see ``fields.gpu_lacks``)."""
    names = {key: indexed("gpu", index, f"nvlink_{key}") for key in ("count", "states", "errors")}
    states: dict[int, str] = {}
    if isinstance(count_answer, int) and not isinstance(count_answer, bool):
        count: int | Refusal = count_answer
    elif isinstance(count_answer, Refusal) and fields.gpu_lacks(
        fields.NVLINK_LINK_COUNT, count_answer.not_supported, newest
    ):
        count = 0  # a GPU without NVLink
    else:
        count = _count_by_state(nvml, handle, states)
    if isinstance(count, Refusal):
        facts.mark_all_unknown(names.values(), f"the GPU's NVLinks could not be counted: {count.reason}")
        return
    facts.set(names["count"], count)
    if count == 0:
        facts.set(names["states"], [])
        facts.set(names["errors"], {})
        return
    answers = binding.field_values(nvml, handle, fields.link_batch(count))
    by_field = dict(zip(fields.link_batch(count), answers, strict=True))
    _link_states(nvml, facts, names["states"], (handle, count, newest), by_field, states)
    _link_errors(nvml, facts, names["errors"], (handle, count, newest), by_field)


def _count_by_state(nvml: Any, handle: Any, states: dict[int, str]) -> int | Refusal:
    """The links, counted by asking each link's state until there is none; the states go in ``states``."""
    for link in range(_MAX_LINKS):
        state = _state_by_function(nvml, handle, link)
        if isinstance(state, Refusal):
            if state.not_supported or state.code == INVALID_ARGUMENT:
                return link  # a board without NVLink answers NOT_SUPPORTED for link 0
            return state
        states[link] = state
    return _MAX_LINKS


def _state_by_function(nvml: Any, handle: Any, link: int) -> str | Refusal:
    answer = binding.ask(nvml, ("nvmlDeviceGetNvLinkState",), handle, link)
    if isinstance(answer, Refusal):
        return answer
    return "active" if int(answer) == int(getattr(nvml, "NVML_FEATURE_ENABLED", 1)) else "inactive"


#: One GPU's links: its handle, its link count, the newest field its driver answered.
_Links = tuple[Any, int, int]


def _link_states(
    nvml: Any, facts: Facts, name: str, links: _Links, by_field: dict[Any, Any], known: dict[int, str]
) -> None:
    handle, count, newest = links
    states: list[str] = []
    for link in range(count):
        answer = by_field[(fields.NVLINK_STATE, link)]
        if not isinstance(answer, Refusal) and int(answer) in fields.NVLINK_STATES:
            states.append(fields.NVLINK_STATES[int(answer)])
            continue
        if isinstance(answer, Refusal) and fields.gpu_lacks(fields.NVLINK_STATE, answer.not_supported, newest):
            states.append("not_supported")
            continue
        state = known.get(link) or _state_by_function(nvml, handle, link)
        if isinstance(state, Refusal):
            if not state.not_supported:
                facts.mark_unknown(name, f"the state of NVLink {link} could not be read: {state.reason}")
                return
            state = "not_supported"
        states.append(state)
    facts.set(name, states)


def _link_errors(nvml: Any, facts: Facts, name: str, links: _Links, by_field: dict[Any, Any]) -> None:
    """Counters per link; one this GPU does not keep (not supported on a link) is not asked again."""
    handle, count, newest = links
    unsupported: set[str] = set()
    found: dict[str, dict[str, int]] = {}
    for link in range(count):
        counts: dict[str, int] = {}
        for key, (field, counters) in COUNTERS.items():
            if key in unsupported:
                continue
            value = by_field[(field, link)]
            if isinstance(value, Refusal) and not fields.gpu_lacks(field, value.not_supported, newest):
                value = _counter_by_function(nvml, handle, link, counters)
            if isinstance(value, Refusal):
                if not value.not_supported:
                    facts.mark_unknown(name, f"the {key} errors of NVLink {link} could not be read: {value.reason}")
                    return
                unsupported.add(key)
                continue
            counts[key] = int(value)
        if any(counts.values()):
            found[str(link)] = counts
    facts.set(name, None if len(unsupported) == len(COUNTERS) else found)


def _counter_by_function(nvml: Any, handle: Any, link: int, counters: tuple[int, ...]) -> int | Refusal:
    total = 0
    for counter in counters:
        answer = binding.ask(nvml, ("nvmlDeviceGetNvLinkErrorCounter",), handle, link, counter)
        if isinstance(answer, Refusal):
            return answer
        total += int(answer)
    return total

"""Derived facts for the NVLink rules: links down where they should be up (CD806) and links with high
error counters (CD807).  Links are certainly ``down`` only for a GPU of a known model on an NVSwitch
fabric, where every link must be up; fewer links up than an identical sibling is ``doubtful``."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.gpu.fabric_health import gpu_spans, no_gpu, on_fabric, spans

#: Link states that carry traffic (a sleeping link wakes on demand).
UP = frozenset({"active", "sleep"})
#: States of a link that does not carry traffic: trained down, or up with its traffic disabled.
DOWN = frozenset({"inactive", "traffic_disabled"})
_OUT = "derived.nvlink"
_WORDS = {"replay": ("replay", "replays"), "recovery": ("recovery", "recoveries"), "crc": ("CRC error", "CRC errors")}


def derive(facts: Facts) -> None:
    states = _states(facts)
    if states is None:
        return
    judged = {i: links for i, links in states.items() if any(state != "not_supported" for state in links)}
    if not judged:
        for name in ("skip_reason", "errors_skip_reason"):
            facts.set(f"{_OUT}.{name}", "no NVLink on these GPUs")
        return
    from cuda_doctor.tables import load_table

    table = load_table("interconnect_expected")
    down, doubtful = _down(facts, judged, table)
    facts.set(f"{_OUT}.skip_reason", None)
    facts.set(f"{_OUT}.down", down)
    facts.set(f"{_OUT}.doubtful", doubtful)
    facts.set(f"{_OUT}.summary", _summary(judged))
    _errors(facts, list(judged), table.get("nvlink_errors", {}))


def _states(facts: Facts) -> dict[int, list[str]] | None:
    """Each GPU's link states; None (the reason recorded) when one GPU's are not known."""
    out: dict[int, list[str]] = {}
    for i in facts.indices("gpu"):
        name = indexed("gpu", i, "nvlink_states")
        value = facts.get(name)
        if not isinstance(value, list):
            _not_read(facts, facts.reason(name) or f"the NVLink states of GPU {i} were not read")
            return None
        out[i] = [str(state) for state in value]
    if not out:
        for out_name in ("skip_reason", "errors_skip_reason"):
            no_gpu(facts, f"{_OUT}.{out_name}")
    return out or None


def _not_read(facts: Facts, reason: str) -> None:
    names = (f"{_OUT}.skip_reason", f"{_OUT}.errors_skip_reason")
    if facts.get("driver.source") == "nvidia-smi":  # a source that has no link states: not checked
        nvml = facts.get("nvml.error")
        why = f"not checked: the NVLinks are read through NVML, which could not be used here ({nvml})"
        for name in names:
            facts.set(name, why if nvml else "not checked: the NVLinks are read through NVML, which was not used")
        return
    facts.mark_all_unknown(names, reason)


def expected_links(name: object, table: dict[str, Any]) -> int | None:
    """The NVLinks an SXM GPU of this name has, from the table; None when it does not say."""
    if not isinstance(name, str):
        return None
    for row in table.get("nvlink_links", []):
        if any(re.search(pattern, name) for pattern in row.get("name_matches", [])):
            return int(row["links"])
    return None


def _down(facts: Facts, states: dict[int, list[str]], table: dict[str, Any]) -> tuple[list[str], list[str]]:
    names = {i: facts.get(indexed("gpu", i, "name")) for i in states}
    up = {i: sum(state in UP for state in links) for i, links in states.items()}
    down: list[str] = []
    doubtful: list[str] = []
    for i, links in states.items():
        lost = [link for link, state in enumerate(links) if state in DOWN]
        if not lost:
            continue
        siblings = [j for j in states if j != i and isinstance(names[i], str) and names[j] == names[i]]
        expected = expected_links(names[i], table)
        wired = expected is not None and len(links) == expected  # the table describes this GPU
        certain = _certain(facts, i, links, up, siblings) if wired else None
        if certain:
            down.append(certain)
            continue
        fuller = max((up[j] for j in siblings), default=0)
        if fuller > up[i]:
            doubtful.append(
                f"GPU {i} has {up[i]} of {len(links)} links up ({_links(lost)} down)"
                f" while its identical siblings have up to {fuller} up"
            )
    return down, doubtful


def _certain(facts: Facts, i: int, links: list[str], up: dict[int, int], siblings: list[int]) -> str | None:
    """Why GPU i's links are certainly down, or None: only on an NVSwitch fabric must each be up."""
    expected = len(links)
    lost = [link for link, state in enumerate(links) if state == "inactive"]
    if not on_fabric(facts, i) or up[i] + len(lost) != expected:
        return None  # not on a fabric, or links with their traffic disabled: not certain
    name = facts.get(indexed("gpu", i, "name"))
    if up[i] > 0:
        why = f"an {name} on an NVSwitch fabric has {expected}"
        return f"GPU {i}: {_links(lost)} down while its other {up[i]} are up ({why})"
    full = [j for j in siblings if up[j] == expected and on_fabric(facts, j)]
    if full:
        return (
            f"GPU {i}: all {expected} links down while {', '.join(gpu_spans(full))}, identical and on the same"
            f" NVSwitch fabric, have all {expected} up"
        )
    return None


def _links(numbers: list[int]) -> str:
    """[4, 9] → "links 4 and 9"; [17] → "link 17"; [0, …, 17] → "links 0–17"."""
    shown = spans(numbers)
    plural = len(shown) > 1 or "–" in shown[0]
    return f"link{'s' if plural else ''} {' and '.join(shown)}"


def _summary(states: dict[int, list[str]]) -> str:
    shapes = Counter((sum(state in UP for state in links), len(links)) for links in states.values())
    return "; ".join(
        f"{count} GPU{'s' if count > 1 else ''} with {up} of {total} links up" for (up, total), count in shapes.items()
    )


def _errors(facts: Facts, gpus: list[int], limits: dict[str, Any]) -> None:
    out = f"{_OUT}.error_links"
    readings: dict[int, dict[str, dict[str, int]]] = {}
    for i in gpus:
        name = indexed("gpu", i, "nvlink_errors")
        value = facts.get(name)
        if not facts.has(name):
            facts.set(f"{_OUT}.errors_skip_reason", None)
            facts.mark_unknown(out, facts.reason(name) or f"the NVLink error counters of GPU {i} were not read")
            return
        if isinstance(value, dict):
            readings[i] = value
    if not readings:
        facts.set(
            f"{_OUT}.errors_skip_reason",
            "the driver keeps no replay, recovery or CRC counter per link for these GPUs"
            " (NVLink 5 counts errors otherwise)",
        )
        return
    facts.set(f"{_OUT}.errors_skip_reason", None)
    limit = {key: int(limits.get(key, 1)) for key in ("replay", "recovery", "crc")}
    found = []
    for i, links in readings.items():
        for link, counts in sorted(links.items(), key=lambda item: int(item[0])):
            if any(int(counts.get(key, 0)) >= limit[key] for key in limit):
                found.append(f"GPU {i} link {link}: {_counts_text(counts)}")
    facts.set(out, found)


def _counts_text(counts: dict[str, int]) -> str:
    """{"replay": 3, "recovery": 0, "crc": 42} → "3 replays and 42 CRC errors"."""
    parts = []
    for key, (one, many) in _WORDS.items():
        n = int(counts.get(key, 0))
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    return " and ".join(parts)

"""Derived facts for the multi-GPU rules (``derived.nccl.*``): when they apply, disabled transports,
missing peer access, the expected bus bandwidth and lagging ranks.  Never raises."""

from __future__ import annotations

import re
from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.nccl import outliers
from cuda_doctor.nccl.outliers import OUTLIER_FACTOR

#: Transports NCCL lets users switch off (debugging variables, NCCL env docs).
TRANSPORT_VARIABLES = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE")
#: Link types over which CUDA peer access is expected to work.
_P2P_EXPECTED = re.compile(r"^(NV\d+|PIX|PXB)$")
_NVLINK = re.compile(r"^NV(\d+)$")


def derive(facts: Facts) -> None:
    for step in (_skip_reason, _pair_skip_reason, _multi_gpu, _transport_disabled, _p2p_missing):
        step(facts)
    try:
        from cuda_doctor.tables import load_table

        data = load_table("interconnect_expected")
    except Exception as exc:  # a missing or broken table leaves the expectation unknown
        facts.mark_unknown("derived.nccl.expected_busbw_gbps", f"interconnect table: {type(exc).__name__}: {exc}")
    else:
        _expected(facts, data)
    for step in (_ratio, _busbw_by_size, _outliers, outliers.derive):
        step(facts)


def _skip_reason(facts: Facts) -> None:
    status = facts.get("nccl.status")
    if not facts.has("nccl.status"):
        reason = facts.reason("nccl.status")
        text = (
            "the NCCL all-reduce did not run: it runs in `check` with two or more GPUs visible, "
            "and with `--nccl` (check or smoke) on one GPU too"
        )
        facts.set("derived.nccl.skip_reason", f"{text}: {reason}" if reason else text)
    elif status == "not_applicable":
        hint = " (`--nccl` runs a one-rank all-reduce on it)" if facts.get("nccl.world_size") == 1 else ""
        facts.set("derived.nccl.skip_reason", f"not applicable: {facts.get('nccl.reason')}{hint}")
    else:
        facts.set("derived.nccl.skip_reason", None)


def _pair_skip_reason(facts: Facts) -> None:
    reason = facts.get("derived.nccl.skip_reason")
    if reason is None and facts.get("nccl.world_size") == 1:
        reason = "not applicable: one GPU (the one-rank all-reduce moves no data between GPUs)"
    facts.set("derived.nccl.pair_skip_reason", reason)


def _multi_gpu(facts: Facts) -> None:
    for name in ("nccl.visible_gpus", "nccl.world_size", "torch.device_count", "gpu.count"):
        value = facts.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            facts.set("derived.nccl.multi_gpu", value >= 2)
            return
    facts.mark_unknown("derived.nccl.multi_gpu", "the number of GPUs is unknown")


def _transport_disabled(facts: Facts) -> None:
    out, env = "derived.nccl.transport_disabled", facts.get("env.nccl")
    if not isinstance(env, dict):
        facts.mark_unknown(out, facts.reason("env.nccl") or "NCCL environment not gathered")
        return
    # NCCL reads these as integers: only 0 (or unset) leaves the transport on.
    found = [f"{k}={env[k]}" for k in TRANSPORT_VARIABLES if k in env and str(env[k]).strip() not in ("", "0")]
    facts.set(out, found)


def _p2p_missing(facts: Facts) -> None:
    p2p, links = facts.get("nccl.p2p"), facts.get("nccl.link_types")
    if not isinstance(p2p, dict) or not isinstance(links, dict):
        missing = "nccl.p2p" if not isinstance(p2p, dict) else "nccl.link_types"
        facts.mark_unknown("derived.nccl.p2p_missing", facts.unknown_reason(missing))
        return
    found = [
        f"GPU {pair.replace('-', '–')} ({links[pair]})"
        for pair, ok in sorted(p2p.items())
        if ok is False and _P2P_EXPECTED.match(str(links.get(pair, "")))
    ]
    facts.set("derived.nccl.p2p_missing", found)


def _capability(facts: Facts) -> str | None:
    caps = facts.get("nccl.device_capabilities")
    if isinstance(caps, list) and caps and caps[0]:
        return str(caps[0])
    value = facts.get(indexed("gpu", 0, "compute_capability"))
    return str(value) if value else None


def _nvlink_row(facts: Facts, table: dict[str, Any]) -> dict[str, Any] | None:
    """The NVLink generation's row: by compute capability, else by NVML's raw NVLink version."""
    rows = table.get("nvlink", [])
    cap, raw = _capability(facts), facts.get(indexed("nvlink", 0, "version_raw"))
    row = next((r for r in rows if cap is not None and cap in r.get("compute_capability", [])), None)
    if row is None:
        row = next((r for r in rows if raw is not None and raw in r.get("nvml_version", [])), None)
    return None if row is None else dict(row)


def on_nvswitch(facts: Facts) -> bool:
    """The GPUs reach each other through NVSwitches: a GPU reports a fabric, or three or more
    GPUs are each joined to every other by more links than one GPU has in all (known from NVML)."""
    from cuda_doctor.gpu.fabric_health import on_fabric

    if any(on_fabric(facts, i) for i in facts.indices("gpu")):
        return True
    links = facts.get("nccl.link_types")
    if not isinstance(links, dict) or not links:
        return False
    counts = _nvlinks_per_pair(links)
    gpus = {int(g) for pair in links for g in str(pair).split("-") if g.isdigit()}
    if len(gpus) < 3 or not counts:
        return False
    most = _most_links(facts)
    return most is not None and min(counts) * (len(gpus) - 1) > most


def _nvlinks_per_pair(links: dict[Any, Any]) -> list[int]:
    """The NVLinks between each pair of GPUs in ``nvidia-smi topo -m`` ("NV18"); [] when a pair has none."""
    matched = [_NVLINK.match(str(v)) for v in links.values()]
    return [int(m.group(1)) for m in matched if m] if all(matched) else []


def _most_links(facts: Facts) -> int | None:
    """The most NVLinks one GPU has up, from the topology read or the GPU probe; None if neither says."""
    counts = [facts.get(indexed("nvlink", i, "active_links")) for i in facts.indices("nvlink")]
    for i in facts.indices("gpu"):
        states = facts.get(indexed("gpu", i, "nvlink_states"))
        if isinstance(states, list):
            counts.append(sum(state in ("active", "sleep") for state in states))
    known = [n for n in counts if isinstance(n, int) and not isinstance(n, bool) and n > 0]
    return max(known) if known else None


def _nvswitch_expected(facts: Facts, table: dict[str, Any]) -> bool:
    """The published figure for GPUs on NVSwitch, when the table has one for them; False otherwise."""
    cap = _capability(facts)
    row = next((r for r in table.get("nvswitch", []) if cap in r.get("compute_capability", [])), None)
    if row is None or not on_nvswitch(facts):
        return False
    nvls = str(facts.get("nccl.nvls_enable") or "0").strip() not in ("", "0")
    expected = float(row["busbw_nvls_gbps" if nvls else "busbw_gbps"])
    sharp = "with" if nvls else "without"
    origin = "measured by cuda-doctor" if row.get("measured_here") else "NCCL's maintainers' figure, not measured here"
    basis = f"{row['label']}, {sharp} NVLink SHARP: about {expected:g} GB/s at {row['at']}; {origin}"
    facts.set("derived.nccl.expected_busbw_gbps", expected)
    facts.set("derived.nccl.expected_basis", basis)
    return True


def _expected(facts: Facts, table: dict[str, Any]) -> None:
    if _nvswitch_expected(facts, table):
        return
    out = "derived.nccl.expected_busbw_gbps"
    links = facts.get("nccl.link_types")
    if isinstance(links, dict) and links:
        counts = _nvlinks_per_pair(links)
    else:
        active = [facts.get(indexed("nvlink", i, "active_links")) for i in facts.indices("nvlink")]
        counts = [int(a) for a in active] if active and all(isinstance(a, int) and a > 0 for a in active) else []
    if counts:
        row = _nvlink_row(facts, table)
        if row is None:
            facts.mark_unknown(
                out, f"NVLink generation of compute capability {_capability(facts)} is not in the interconnect table"
            )
            return
        n = min(counts)
        theoretical = n * float(row["per_link_gbps"])
        fraction = float(table["nvlink_fraction"]["achievable_fraction"])
        basis = f"NVLink {row['generation']} x{n} links: {theoretical:g} GB/s per direction x {fraction:g} achievable"
    else:
        gens = [facts.get(indexed("gpu", i, "pcie_gen_max")) for i in facts.indices("gpu")]
        widths = [facts.get(indexed("gpu", i, "pcie_width_max")) for i in facts.indices("gpu")]
        if not gens or not all(isinstance(g, int) for g in gens + widths):
            facts.mark_unknown(out, "no NVLink between the GPUs and their PCIe generation/width is unknown")
            return
        gen, width = min(gens), min(widths)
        rows = {int(r["generation"]): r for r in table.get("pcie", [])}
        if gen not in rows:
            facts.mark_unknown(out, f"PCIe Gen{gen} is not in the interconnect table")
            return
        theoretical = float(rows[gen]["per_lane_gbps"]) * width
        fraction = float(table["pcie_fraction"]["achievable_fraction"])
        basis = f"PCIe Gen{gen} x{width}: {theoretical:.1f} GB/s per direction x {fraction:g} achievable"
    facts.set(out, round(theoretical * fraction, 1))
    facts.set("derived.nccl.expected_basis", basis)


def _ratio(facts: Facts) -> None:
    peak = facts.get("nccl.busbw_peak_gbps")
    expected = facts.get("derived.nccl.expected_busbw_gbps")
    if not isinstance(peak, (int, float)) or not isinstance(expected, (int, float)) or expected <= 0:
        missing = "nccl.busbw_peak_gbps" if not isinstance(peak, (int, float)) else "derived.nccl.expected_busbw_gbps"
        facts.mark_unknown("derived.nccl.busbw_ratio", facts.unknown_reason(missing))
        return
    facts.set("derived.nccl.busbw_ratio", round(float(peak) / float(expected), 3))


def _busbw_by_size(facts: Facts) -> None:
    """``derived.nccl.busbw_by_size``: "1 MiB 15 GB/s, 16 MiB 105 GB/s, 256 MiB 150 GB/s"."""
    out = "derived.nccl.busbw_by_size"
    busbw = facts.get("nccl.busbw_gbps")
    if not isinstance(busbw, dict) or not busbw:
        facts.mark_unknown(out, facts.reason("nccl.busbw_gbps") or "no bus bandwidth measured")
        return
    shown = []
    for size, gbps in sorted(busbw.items(), key=lambda item: int(item[0])):
        mib = int(size) / (1024 * 1024)
        figure = f"{float(gbps):.1f} GB/s" if isinstance(gbps, (int, float)) else "not measured"
        shown.append(f"{mib:g} MiB {figure}")
    facts.set(out, ", ".join(shown))


def _outliers(facts: Facts) -> None:
    times = facts.get("nccl.per_rank_seconds")
    if not isinstance(times, list):
        facts.mark_unknown("derived.nccl.outlier_ranks", facts.reason("nccl.per_rank_seconds") or "no per-rank timings")
        return
    from statistics import median

    from cuda_doctor.nccl.runner import outliers  # only when there is something to compare

    names = facts.get("nccl.device_names")
    groups = names if isinstance(names, list) and len(names) == len(times) else None
    values = [float(t) if isinstance(t, (int, float)) else None for t in times]
    found = []
    for i in outliers(values, groups, OUTLIER_FACTOR):
        mid = median(v for j, v in enumerate(values) if v is not None and (groups is None or groups[j] == groups[i]))
        label = f" ({groups[i]})" if groups else ""
        found.append(f"rank {i}{label}: {values[i]:.4f} s vs median {mid:.4f} s")
    facts.set("derived.nccl.outlier_ranks", found)

"""Derived facts for the GPU memory rules: ``derived.gpu[i].ecc_uncorrected`` and ``memory_repair``
(``row_remapping`` or ``page_retirement``), a count or flag not reported making them unknown, never a
pass; ``memory_free_mib`` and ``memory_free_percent``, and the floor under which a GPU is nearly full."""

from __future__ import annotations

from cuda_doctor.core.facts import Facts, indexed

#: The configured floor (``gpu-min-free-percent``), else rules/data/gpu_memory.toml's.
CONFIGURED_FLOOR = "config.gpu_min_free_percent"
FLOOR = "derived.gpu_min_free_percent"


def derive(facts: Facts) -> None:
    for i in facts.indices("gpu"):
        _ecc(facts, i)
        _repair(facts, i)
        _free(facts, i)
    if facts.indices("gpu"):
        configured = facts.get(CONFIGURED_FLOOR)
        facts.set(FLOOR, configured if isinstance(configured, (int, float)) else default_floor())


def default_floor() -> float:
    from cuda_doctor.tables import load_table

    return float(load_table("gpu_memory")["nearly_full"]["min_free_percent"])


def _free(facts: Facts, i: int) -> None:
    """What is free of the GPU's memory: its total less what is used (NVML's v2 "used" leaves out
    what the driver reserves, as nvidia-smi's does)."""
    total, used = facts.get(indexed("gpu", i, "memory_total_mib")), facts.get(indexed("gpu", i, "memory_used_mib"))
    out = f"derived.gpu[{i}].memory_free"
    missing = [name for name in ("memory_total_mib", "memory_used_mib") if not facts.has(indexed("gpu", i, name))]
    if missing:
        why = facts.reason(indexed("gpu", i, missing[0])) or f"{missing[0]} was not read"
        facts.mark_all_unknown((f"{out}_mib", f"{out}_percent"), why)
    elif not isinstance(total, int) or not isinstance(used, int) or total <= 0:
        facts.mark_all_unknown((f"{out}_mib", f"{out}_percent"), "the driver reports no memory size for this GPU")
    else:
        free = max(total - used, 0)
        facts.set(f"{out}_mib", free)
        facts.set(f"{out}_percent", round(100.0 * free / total, 1))


def _ecc(facts: Facts, i: int) -> None:
    name, out = indexed("gpu", i, "ecc_uncorrected_volatile"), f"derived.gpu[{i}].ecc_uncorrected"
    count = facts.get(name)
    if not facts.has(name):
        facts.mark_unknown(out, facts.reason(name) or "the uncorrectable ECC count was not read")
    elif not isinstance(count, int) or isinstance(count, bool):
        facts.mark_unknown(out, "the driver reports no uncorrectable ECC count for this GPU (not supported)")
    else:
        facts.set(out, count)


def _flag(facts: Facts, i: int, field: str) -> tuple[bool | None, str | None]:
    """The flag, or None with why it is not there."""
    name = indexed("gpu", i, field)
    if not facts.has(name):
        return None, facts.reason(name) or f"{field.replace('_', ' ')} was not read"
    value = facts.get(name)
    return (value, None) if isinstance(value, bool) else (None, "not supported")


def _repair(facts: Facts, i: int) -> None:
    out = f"derived.gpu[{i}].memory_repair"
    pending, why_pending = _flag(facts, i, "remapped_rows_pending")
    failure, why_failure = _flag(facts, i, "remapped_rows_failure")
    retired, why_retired = _flag(facts, i, "retired_pages_pending")
    if pending is not None and failure is not None:
        remap = "a remap pending" if pending else "no remap pending"
        failed = "a remapping failure" if failure else "no remapping failure"
        facts.set(out, "row_remapping")
        facts.set(f"{out}_summary", f"row remapping: {remap}, {failed}")
        return
    if retired is not None:
        facts.set(out, "page_retirement")
        facts.set(f"{out}_summary", f"page retirement: {'pages pending' if retired else 'no page pending'}")
        return
    facts.mark_unknown(
        out,
        "neither row remapping nor page retirement could be read "
        f"(row remapping: {why_pending or why_failure}; page retirement: {why_retired})",
    )

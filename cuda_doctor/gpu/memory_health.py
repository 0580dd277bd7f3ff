"""Derived facts for the GPU memory health rules: what the driver's memory-error counters and
repair flags say, and — as important — when they say nothing.

A reading the GPU does not support is recorded as null by the probes; for these rules null must
not read as "no error": a count or flag that is not reported makes the derived fact unknown, so
the rule's result is unknown, never a pass.  Row remapping (Ampere and newer) replaced page
retirement (up to Volta): a GPU reports one of the two, and the other being "not supported" is
expected (NVIDIA's GPU memory error management guide, row remapping).

- ``derived.gpu[i].ecc_uncorrected``: the volatile uncorrectable ECC count, where reported.
- ``derived.gpu[i].memory_repair``: ``row_remapping`` | ``page_retirement``: the scheme whose
  flags were read; ``memory_repair_summary`` says what they are, in words.
"""

from __future__ import annotations

from cuda_doctor.core.facts import Facts, indexed


def derive(facts: Facts) -> None:
    for i in facts.indices("gpu"):
        _ecc(facts, i)
        _repair(facts, i)


def _ecc(facts: Facts, i: int) -> None:
    name, out = indexed("gpu", i, "ecc_uncorrected_volatile"), f"derived.gpu[{i}].ecc_uncorrected"
    if not facts.has(name):
        facts.mark_unknown(out, facts.reason(name) or "the uncorrectable ECC count was not read")
        return
    count = facts.get(name)
    if not isinstance(count, int) or isinstance(count, bool):
        facts.mark_unknown(out, "the driver reports no uncorrectable ECC count for this GPU (not supported)")
        return
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
        facts.set(out, "row_remapping")
        facts.set(
            f"{out}_summary",
            f"row remapping: {'a remap pending' if pending else 'no remap pending'}, "
            f"{'a remapping failure' if failure else 'no remapping failure'}",
        )
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

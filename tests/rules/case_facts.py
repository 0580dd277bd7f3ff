"""A rule case's facts: the changes a case in ``cases/*.toml`` makes to the facts it starts from."""

from __future__ import annotations

from typing import Any

from cuda_doctor.core.facts import Facts

NULL = "__null__"  # TOML has no null


def apply_case(facts: Facts, case: dict[str, Any]) -> Facts:
    """``facts`` with a case's changes: its ``unset`` facts and ``unset_family`` families gone,
    its ``set`` values, its ``unknown`` facts unknown with their reasons."""
    for name in case.get("unset", []):
        facts.values.pop(name, None)
    for family in case.get("unset_family", []):  # every fact of a probe that did not run
        for name in [name for name in facts.values if name.startswith((f"{family}.", f"{family}["))]:
            facts.values.pop(name)
    for name, value in case.get("set", {}).items():
        facts.set(name, None if value == NULL else value)
    for name, reason in case.get("unknown", {}).items():
        facts.values.pop(name, None)
        facts.mark_unknown(name, reason)
    return facts

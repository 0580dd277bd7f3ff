"""Which rules a selection (``--select`` / ``--ignore``, or the configuration) names: ids, id prefixes
or categories, in any case.  Environment and lint rules share one configuration: each command applies
the entries that name rules of its own kind."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from cuda_doctor.base.errors import UserError

if TYPE_CHECKING:
    from cuda_doctor.core.config import Config


class Rule(Protocol):
    """What selecting needs of a rule (``cuda_doctor.core.rules.Rule`` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    def matches(self, pattern: str) -> bool: ...


KINDS = {"env": ("check", "environment"), "lint": ("lint", "lint")}  # kind → (the command running it, its word)
#: Why a rule did not run (its ``skipped`` message); a report with any of these cannot vouch for the machine.
DESELECTED_BY_OPTIONS = "deselected by --select/--ignore"
IGNORED_BY_CONFIG = "ignored by config"
NOT_SELECTED_BY_CONFIG = "not selected by config"
OFF_BY_CONFIG = 'ignored by config (severity = "off")'
DESELECTED = frozenset({DESELECTED_BY_OPTIONS, IGNORED_BY_CONFIG, NOT_SELECTED_BY_CONFIG, OFF_BY_CONFIG})


class SelectionError(UserError):
    """A selection names no rule, or on the command line only rules this command does not run."""


def unknown_patterns(rules: Iterable[Rule], patterns: Iterable[str]) -> list[str]:
    """The patterns that match no rule: almost always a typo."""
    rules = list(rules)
    return [p for p in patterns if not any(rule.matches(p) for rule in rules)]


def selected_ids(rules: Iterable[Rule], select: Iterable[str], ignore: Iterable[str]) -> set[str]:
    """The ids of ``rules`` (of one kind) that ``select`` and ``ignore`` leave; a select entry naming none
    of them (rules of the other kind) does not filter."""
    rules = list(rules)
    chosen = [p for p in select if any(rule.matches(p) for rule in rules)]
    keep = [rule for rule in rules if not chosen or any(rule.matches(p) for p in chosen)]
    return {rule.id for rule in keep if not any(rule.matches(p) for p in ignore)}


def left_out(
    rules: Sequence[Rule],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    configured: tuple[Iterable[str], Iterable[str]] = ((), ()),
    off: Iterable[str] = (),
) -> dict[str, str]:
    """The ids of ``rules`` (of one kind) that will not run → why: ``select`` / ``ignore`` on the
    command line, the ``configured`` (select, ignore), or ``off`` in the configuration."""
    config_select, config_ignore = (list(patterns) for patterns in configured)
    chosen = selected_ids(rules, [*config_select, *select], [*config_ignore, *ignore])
    by_config = selected_ids(rules, config_select, config_ignore)
    out = {rule_id: OFF_BY_CONFIG for rule_id in off}
    for rule in rules:
        if rule.id in chosen or rule.id in out:
            continue
        if rule.id in by_config:
            out[rule.id] = DESELECTED_BY_OPTIONS
        elif any(rule.matches(p) for p in config_ignore):
            out[rule.id] = IGNORED_BY_CONFIG
        else:
            out[rule.id] = NOT_SELECTED_BY_CONFIG
    return out


def check_selection(
    rules: Sequence[Rule], kind: str, config: Config, select: Iterable[str] = (), ignore: Iterable[str] = ()
) -> None:
    """Refuse entries that match no rule (a typo) and a ``--select`` of only the other kind's rules."""
    select = list(select)
    where = config.source or "configuration"
    for label, patterns in (
        ("--select", select),
        ("--ignore", ignore),
        (f"{where}: field 'select'", config.select),
        (f"{where}: field 'ignore'", config.ignore),
        (f"{where}: field 'severity'", config.severity),
    ):
        bad = unknown_patterns(rules, patterns)
        if bad:
            raise SelectionError(
                f"{label}: no rule matches {', '.join(bad)} (unknown rule id or category "
                f"{', '.join(repr(p) for p in bad)}; see `cuda-doctor rules`)"
            )
    mine = [rule for rule in rules if rule.kind == kind]
    command, word = next(value for key, value in KINDS.items() if key != kind)
    for pattern in select:
        if not any(rule.matches(pattern) for rule in mine):
            raise SelectionError(
                f"--select: {pattern} names only {word} rules; run them with `cuda-doctor {command} --select {pattern}`"
            )

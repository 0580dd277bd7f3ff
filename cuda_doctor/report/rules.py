"""The rules report (``rules``, ``explain``): rule metadata as text, JSON or Markdown, one rule
explained, and the generated rules reference (docs/rules.md, the Markdown format)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from cuda_doctor.core.rules import Rule
from cuda_doctor.report import printable

#: A ``{name}`` placeholder in a lint rule's message, filled from the code the finding is about.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def render_rules(rules: Sequence[Rule], fmt: str, overrides: Mapping[str, str] | None = None) -> str:
    """``overrides``: rule id → severity from the configuration (the reference shows the defaults)."""
    return FORMATS[fmt](rules, overrides or {})


def _text(rules: Sequence[Rule], overrides: Mapping[str, str]) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=110, no_color=True, highlight=False, markup=False)
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
    for column in ("id", "severity", "category", "title"):
        table.add_column(column, no_wrap=column != "title")
    for rule in rules:  # a user's rule file is text from outside: its control characters are escaped
        severity = overrides.get(rule.id, rule.severity.value)
        table.add_row(*map(printable, (rule.id, severity, rule.category, rule.title)))
    console.print(table)
    return buffer.getvalue()


def _json(rules: Sequence[Rule], overrides: Mapping[str, str]) -> str:
    listed = [
        {
            "id": rule.id,
            "kind": rule.kind,
            "title": rule.title,
            "category": rule.category,
            "severity": overrides.get(rule.id, rule.severity.value),
            "rationale": rule.rationale.strip(),
            "links": list(rule.links),
            "explains": _explained(rule),
        }
        for rule in rules
    ]
    return json.dumps(listed, indent=2) + "\n"


def _explained(rule: Rule) -> list[str]:
    """Every rule a finding of ``rule`` may explain, by the rule or by one of its outcomes."""
    named = set(rule.explains)
    for outcome in rule.outcomes:
        named.update(outcome.explains or ())
    return sorted(named)


def render_rule_markdown(rule: Rule) -> str:
    lines = [f"## {rule.id}: {rule.title}", ""]
    lines.append(f"*{rule.kind} rule · category `{rule.category}` · default severity `{rule.severity.value}`*")
    lines += ["", *rule.rationale.strip().split("\n"), ""]  # its own lines; any other control is escaped
    if rule.kind == "lint":
        # placeholders are shown as "…", and named in words
        lines.append(f"Reports: {_PLACEHOLDER.sub('…', rule.message.strip())}")
        if rule.fix:
            lines.append(f"Fix: {_PLACEHOLDER.sub('…', rule.fix.strip())}")
        filled = dict.fromkeys(_PLACEHOLDER.findall(f"{rule.message} {rule.fix or ''}"))
        if filled:
            words = ", ".join(f"the {name.replace('_', ' ')}" for name in filled)
            lines.append(f"(Each … is what the finding saw in the code: {words}.)")
        lines.append("")
    else:
        if rule.for_each:
            lines += [f"Judged once for each `{rule.for_each}`.", ""]
        for outcome in rule.outcomes:
            level_name = "pass" if outcome.status else (outcome.severity or rule.severity).value
            lines.append(f"- **{level_name}** when `{_condition_text(outcome.when)}`: {outcome.message.strip()}")
            if outcome.fix:
                lines.append(f"  - fix: {outcome.fix.strip()}")
            lines += [f"  - `{command}`" for command in outcome.commands]
            explains = rule.explains if outcome.explains is None else outcome.explains
            if explains and not outcome.status:
                lines.append(f"  - explains the failure of {', '.join(explains)} in the same run")
        lines += [f"- otherwise **pass**: {rule.pass_message.strip()}", ""]
    if rule.links:
        lines += ["Sources: " + ", ".join(f"<{link}>" for link in rule.links), ""]
    return "\n".join(printable(line) for line in lines) + "\n"


def _condition_text(cond: Mapping[str, object]) -> str:
    for key in ("all", "any"):
        if key in cond:
            parts = cond[key]
            assert isinstance(parts, list)
            return f" {'and' if key == 'all' else 'or'} ".join(f"({_condition_text(p)})" for p in parts)
    if "not" in cond:
        inner = cond["not"]
        assert isinstance(inner, dict)
        return f"not ({_condition_text(inner)})"
    op = next(k for k in cond if k != "fact")
    operand = cond[op]
    if isinstance(operand, dict) and "fact" in operand:
        operand = operand["fact"]
    return f"{cond['fact']} {op} {json.dumps(operand)}"


def render_reference(rules: Sequence[Rule]) -> str:
    """docs/rules.md: generated from the rule files; a test fails when it is stale."""
    lines = [
        "# Rules reference",
        "",
        "Generated from the files in `rules/` by `cuda-doctor rules --format markdown`; do not edit by hand.",
        "",
        "| id | severity | category | title |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        printable(f"| [{rule.id}](#{rule.id.lower()}) | {rule.severity.value} | {rule.category} | {rule.title} |")
        for rule in rules
    ]
    return "\n".join(lines) + "\n\n" + "".join(render_rule_markdown(r) for r in rules)


FORMATS: dict[str, Callable[[Sequence[Rule], Mapping[str, str]], str]] = {
    "text": _text,
    "json": _json,
    "markdown": lambda rules, overrides: render_reference(rules),
}

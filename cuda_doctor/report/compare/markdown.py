"""Markdown for ``diff`` and ``fleet``: paste into an issue or a CI summary."""

from __future__ import annotations

from typing import Any

from cuda_doctor.compare.diff import Diff, check_groups, figure_groups, rule_groups
from cuda_doctor.compare.fleet import CONFIG_LABELS, Fleet, Node
from cuda_doctor.compare.gpus import GROUP_FROM
from cuda_doctor.report import Markup, md_cell, md_text, printable
from cuda_doctor.report.compare import wording


def _joined(lines: list[str]) -> str:
    """The lines, each with any control character from a saved report (a hostname) escaped."""
    return "\n".join(printable(line) for line in lines).rstrip() + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _section(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """A heading and its table; nothing when there are no rows."""
    return [f"### {title}", "", *_table(header, rows)] if rows else []


def _bold(text: str, bold: bool = True) -> str:
    return Markup(f"**{md_text(text)}**") if text and bold else text


def _quote(note: str, end: str = ".") -> list[str]:
    """A note as a Markdown quote, capitalised, and the blank line after it."""
    return [f"> {md_text(note[0].upper() + note[1:])}{end}", ""]


def render_diff(diff: Diff, *, verbose: bool = False, **_: Any) -> str:
    """``verbose``: every GPU's row (else a difference many GPUs share is one row)."""
    b, a = diff.before, diff.after
    least = 1 << 30 if verbose else GROUP_FROM
    rule_rows, check_rows, figure_rows = rule_groups(diff, least), check_groups(diff, least), figure_groups(diff, least)
    title = b.host if diff.same_host else f"{b.host} → {a.host}"
    out = [f"## cuda-doctor diff: {md_text(title)}" if title else "## cuda-doctor diff", ""]
    out += [f"**{md_text(wording.diff_verdict(diff))}** (noise band ±{diff.noise:.0%})", ""]
    sources = [
        ["report", b.path, a.path],
        ["created", b.created or "?", a.created or "?"],
        ["cuda-doctor", b.tool_version or "?", a.tool_version or "?"],
    ]
    out += _table(["", "before", "after"], sources)
    if not diff.same_host:
        out += ["> The two reports come from different hosts.", ""]
    skipped = wording.no_results_note(diff)
    if skipped:
        out += _quote(skipped)
    for gap in diff.not_run:
        out += _quote(wording.not_run_note(gap))
    for only in diff.gpus_only:
        out += _quote(wording.gpus_only_note(only))
    if any(wording.is_grouped(groups) for groups in (rule_rows, check_rows, figure_rows)):
        out += _quote(wording.GROUPED_NOTE)
    side, env = wording.fact_side, wording.env_side
    status, value = wording.status_text, wording.config_value
    facts = [[f.label, side(f, False), side(f, True), _bold(wording.fact_note(f))] for f in diff.facts]
    out += _section("Configuration", ["", "before", "after", ""], facts)
    environment = [
        [Markup(f"`{e.variable.replace('`', '')}`"), env(e.before), env(e.after), _bold(e.note or "", e.worse)]
        for e in diff.environment
    ]
    out += _section("Environment", ["variable", "before", "after", ""], environment)
    directions = {"worse": Markup("**worse**"), "better": "better", "changed": ""}
    rules = []
    for rule_group in rule_rows:
        r = rule_group.first
        subject = wording.group_subject(rule_group, r.subject)
        message = wording.group_message(rule_group)
        rules.append([r.rule, subject, status(r.before), status(r.after), directions[r.direction], message])
    out += _section("Rule outcomes that changed", ["rule", "subject", "before", "after", "", "message"], rules)
    checks = []
    for check_group in check_rows:
        c = check_group.first
        label = c.label if len(check_group.members) == 1 else f"{wording.group_subject(check_group, None)} {c.check}"
        checks.append([label, value(c.before), value(c.after), Markup("**broken**") if c.worse else ""])
    out += _section("Smoke checks", ["check", "before", "after", ""], checks)
    figures = []
    for figure_group in figure_rows:
        f = figure_group.first
        note = wording.FIGURE_NOTES[f.verdict]
        spans = [wording.figure_span(figure_group, False), wording.figure_span(figure_group, True)]
        values = [*spans, wording.ratio_span(figure_group)]
        gpus = wording.group_gpus(figure_group)
        figures.append([gpus, f"{f.label} ({f.unit})", *values, _bold(note, f.verdict == "slower")])
    out += _section("Smoke figures", ["GPU", "figure", "before", "after", "ratio", ""], figures)
    return _joined(out)


def render_fleet(fleet: Fleet, **_: Any) -> str:
    out = ["## cuda-doctor fleet", "", f"**{md_text(wording.fleet_verdict(fleet))}**", ""]
    value = wording.config_value
    if fleet.majority is not None:
        tie = f" ({wording.tie_note(fleet)})" if fleet.majority_tied else ""
        out += [f"### Majority configuration: {fleet.majority_count} of {len(fleet.nodes)} nodes{md_text(tie)}", ""]
        out += _table(["", "value"], [[CONFIG_LABELS[k], value(v)] for k, v in vars(fleet.majority).items()])
    differing = [[d.host, f.label, value(f.value), value(f.majority)] for d in fleet.differing for f in d.differences]
    out += _section("Nodes that differ", ["node", "differs in", "node has", "majority has"], differing)
    out += _section("Failing rules", ["node", "failing"], [[n.host, ", ".join(n.failing)] for n in fleet.failing])
    outliers = [[o.host, str(o.gpu), o.direction, wording.outlier_text(o)] for o in fleet.outliers]
    out += _section("Performance outliers", ["node", "GPU", "", "finding"], outliers)
    out += _section("Unreadable reports", ["file", "problem"], [[e.path, e.reason] for e in fleet.errors])
    for note in wording.fleet_notes(fleet):
        out += _quote(note, end="")
    header = ["node", "driver", "torch", "CUDA build", "NCCL", "GPUs", "failing", "warnings"]
    out += ["### Nodes", "", *_table(header, [_node_row(n) for n in fleet.nodes])]
    return _joined(out)


def _node_row(node: Node) -> list[str]:
    c, value = node.config, wording.config_value
    versions = [value(c.driver), value(c.torch), value(c.torch_cuda), value(c.nccl)]
    counts = [str(len(node.failing)), str(node.warnings)]
    return [node.host, *versions, wording.gpus_text(c.gpu_count, c.gpu_model), *counts]

"""Terminal output for ``diff`` and ``fleet`` (rich tables)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cuda_doctor.compare.diff import Diff
from cuda_doctor.compare.fleet import CONFIG_LABELS, Fleet, Node
from cuda_doctor.report import printable
from cuda_doctor.report.compare import wording

#: Above this many nodes, the node table lists only the ones with something to say.
NODE_TABLE_LIMIT = 50

Row = Sequence[str | Text]  # a table row: plain cells are escaped when printed, Text cells already are
_MARK = {"worse": ("✗", "red"), "better": ("✓", "green"), "changed": ("•", "yellow")}


def _console(color: bool, width: int | None, out: io.StringIO) -> Console:
    """``width`` None: the terminal's.  No markup: "[...]" in a message is text, not a style tag."""
    return Console(
        file=out, force_terminal=color, no_color=not color, width=width, highlight=False, markup=False, soft_wrap=True
    )


def _text(text: str, style: str = "") -> Text:
    """Text from a saved report (a hostname, a value, a message) with its control characters escaped."""
    return Text(printable(text), style=style)


def _section(con: Console, title: str, style: str = "bold") -> None:
    """A blank line, then ``title``: a section's heading, or a closing line."""
    con.print()
    con.print(_text(title, style=style))


def _print_table(con: Console, columns: tuple[str, ...], rows: Sequence[Row], header: bool = True) -> None:
    table = Table(*columns, box=None, pad_edge=False, show_header=header, header_style="bold")
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else printable(cell) for cell in row))
    con.print(table)


def render_diff(diff: Diff, *, color: bool = False, width: int | None = 120) -> str:
    buffer = io.StringIO()
    con = _console(color, width, buffer)
    _diff_header(con, diff)
    _diff_configuration(con, diff)
    if diff.rules:
        _section(con, "Rule outcomes that changed")
        rows: list[Row] = []
        for r in diff.rules:
            mark, style = _MARK[r.direction]
            was, now = wording.status_text(r.before), _text(wording.status_text(r.after), style=style)
            rows.append([_text(f"  {mark}", style=style), r.rule, r.subject or "", was, "→", now, r.message])
        _print_table(con, ("", "rule", "subject", "before", "", "after", "message"), rows)
    if diff.checks:
        _section(con, "Smoke checks")
        for c in diff.checks:
            change = f"{wording.config_value(c.before)} → {wording.config_value(c.after)}"
            con.print(_text(f"  {c.label}: {change}", style="red" if c.worse else "yellow"))
    if diff.figures:
        _section(con, f"Smoke figures (noise band ±{diff.noise:.0%})")
        rows = []
        for fig in diff.figures:
            style = {"slower": "red", "faster": "green"}.get(fig.verdict, "")
            before, after = wording.figure_value(fig.before), wording.figure_value(fig.after)
            ratio = _text(wording.ratio(fig.ratio), style=style)
            note = _text(wording.FIGURE_NOTES[fig.verdict], style=style or "dim")
            rows.append(["", str(fig.gpu), fig.label, before, after, fig.unit, ratio, note])
        _print_table(con, ("", "GPU", "figure", "before", "after", "unit", "ratio", ""), rows)
    _section(con, wording.diff_verdict(diff), "bold red" if diff.worse else "bold green")
    return buffer.getvalue()


def _diff_header(con: Console, diff: Diff) -> None:
    b, a = diff.before, diff.after
    title = b.host if diff.same_host else f"{b.host} → {a.host}"
    con.print(Text.assemble(("cuda-doctor diff", "bold"), printable(f" {title}") if title else ""))
    con.print(_text(f"  before: {b.path} ({b.created or 'no date'})", style="dim"))
    con.print(_text(f"  after:  {a.path} ({a.created or 'no date'})", style="dim"))
    if not diff.same_host:
        con.print(_text("  ! the two reports come from different hosts", style="yellow"))
    for report in (b, a):
        for note in report.notes:
            con.print(_text(f"  note ({report.path}): {note}", style="dim"))
    skipped = wording.no_results_note(diff)
    if skipped:
        con.print(_text(f"  ! {skipped}", style="yellow"))
    for gap in diff.not_run:
        con.print(_text(f"  ! {wording.not_run_note(gap)}", style="yellow"))


def _diff_configuration(con: Console, diff: Diff) -> None:
    """The key facts and the environment variables that changed: label, before → after, note."""
    side, env = wording.fact_side, wording.env_side
    facts: list[Row] = []
    for f in diff.facts:
        note = wording.fact_note(f)  # styled only when there is one: a styled empty cell colours its padding
        facts.append([f"  {f.label}", side(f, False), "→", side(f, True), _text(note, "red" if note else "")])
    environment: list[Row] = [
        [f"  {e.variable}", env(e.before), "→", env(e.after), _text(e.note or "", style="red" if e.worse else "yellow")]
        for e in diff.environment
    ]
    for title, rows in (("Configuration", facts), ("Environment", environment)):
        if rows:
            _section(con, title)
            _print_table(con, ("", "before", "", "after", ""), rows)


def _node_row(node: Node, flagged: set[str]) -> Row:
    c, value = node.config, wording.config_value
    failing = ", ".join(node.failing)
    config = [value(c.driver), value(c.torch), value(c.nccl), wording.gpus_text(c.gpu_count, c.gpu_model)]
    marks = [_text(failing or "—", "red" if failing else "dim"), _text("!" if node.host in flagged else "", "yellow")]
    return [node.host, *config, *marks]


def render_fleet(fleet: Fleet, *, color: bool = False, width: int | None = 120, all_nodes: bool = False) -> str:
    """``all_nodes``: list every node, however many (else only the flagged ones above 50)."""
    buffer = io.StringIO()
    con = _console(color, width, buffer)
    con.print(_text("cuda-doctor fleet", "bold"))
    value = wording.config_value
    flagged = {d.host for d in fleet.differing} | {o.host for o in fleet.outliers} | {n.host for n in fleet.failing}
    show_all = all_nodes or len(fleet.nodes) <= NODE_TABLE_LIMIT
    listed = [n for n in fleet.nodes if show_all or n.host in flagged]
    if listed:
        some = f"Nodes with findings ({len(listed)} of {len(fleet.nodes)}; --all-nodes lists every one)"
        _section(con, "Nodes" if show_all else some)
        columns = ("node", "driver", "torch", "NCCL", "GPUs", "failing rules", "")
        _print_table(con, columns, [_node_row(n, flagged) for n in listed])
    if fleet.majority is not None:
        tie = f"; {wording.tie_note(fleet)}" if fleet.majority_tied else ""
        _section(con, f"Majority configuration ({fleet.majority_count} of {len(fleet.nodes)} nodes{tie})")
        config = [[f"  {CONFIG_LABELS[key]}", value(v)] for key, v in vars(fleet.majority).items()]
        _print_table(con, ("", ""), config, header=False)
    if fleet.differing:
        _section(con, "Nodes that differ from the majority")
        rows: list[Row] = []
        for d in fleet.differing:
            for i, f in enumerate(d.differences):
                host = d.host if i == 0 else ""  # once, above the node's other differences
                rows.append([_text("  !", "yellow"), host, f.label, _text(value(f.value), "yellow"), value(f.majority)])
        _print_table(con, ("", "node", "differs in", "node has", "majority has"), rows)
    if fleet.outliers:
        _section(con, "Performance outliers (median and MAD per GPU model)")
        for o in fleet.outliers:
            style = "red" if o.direction == "slow" else "yellow"
            con.print(_text(f"  {o.direction:<4}  {o.host} GPU {o.gpu}: {wording.outlier_text(o)}", style=style))
    if fleet.errors:
        _section(con, "Unreadable reports (left out of the comparison)")
        for e in fleet.errors:
            con.print(_text(f"  ✗ {e}", style="red"))
    for note in wording.fleet_notes(fleet):
        _section(con, f"! {note}", "yellow")
    _section(con, wording.fleet_verdict(fleet), "bold green" if fleet.uniform else "bold yellow")
    return buffer.getvalue()

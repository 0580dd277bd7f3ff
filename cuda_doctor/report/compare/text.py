"""Terminal output for ``diff`` and ``fleet`` (rich tables)."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.console import COLOR_SYSTEMS, Console
from rich.style import Style
from rich.table import Table
from rich.text import Text

from cuda_doctor.compare.diff import Diff, check_groups, figure_groups, rule_groups
from cuda_doctor.compare.fleet import CONFIG_LABELS, Fleet, Node
from cuda_doctor.compare.gpus import GROUP_FROM
from cuda_doctor.report import printable
from cuda_doctor.report.compare import wording

#: Above this many nodes, the node table lists only the ones with something to say.
NODE_TABLE_LIMIT = 50
#: Tables longer than this are laid out here, one line per row (rich's layout is too slow for them).
RICH_TABLE_ROWS = 200

#: A cell's text (escaped already) and its style: cheaper than ``Text`` in a table of 20,000 rows.
Styled = tuple[str, str]
Row = Sequence[str | Text | Styled]  # a table row: plain cells are escaped when printed, the others already are
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
    if len(rows) > RICH_TABLE_ROWS:
        _print_long_table(con, columns, rows, header)
        return
    table = Table(*columns, box=None, pad_edge=False, show_header=header, header_style="bold")
    for row in rows:
        table.add_row(*(_rich_cell(cell) for cell in row))
    con.print(table)


def _rich_cell(cell: str | Text | Styled) -> str | Text:
    if isinstance(cell, tuple):
        return Text(cell[0], style=cell[1])
    return cell if isinstance(cell, Text) else printable(cell)


def _print_long_table(con: Console, columns: tuple[str, ...], rows: Sequence[Row], header: bool) -> None:
    """A table laid out as rich lays out ``_print_table``'s (columns two spaces apart), one line per
    row, never wrapped: rich measures and wraps every cell, which for 20,000 nodes took 20 s."""
    cells = [[_cell(c) for c in row] for row in rows]
    if header:
        cells.insert(0, [(title, "bold", cell_len(title)) for title in columns])
    widths = [max((row[i][2] for row in cells if i < len(row)), default=0) for i in range(len(columns))]
    styled = _ansi_styler(con)
    lines = []
    for row in cells:
        parts = [
            styled(text, style) + " " * (width - size) for (text, style, size), width in zip(row, widths, strict=False)
        ]
        lines.append("  ".join(parts).rstrip())
    con.file.write("\n".join(lines) + "\n")


def _cell(cell: str | Text | Styled) -> tuple[str, str, int]:
    """(text with its controls escaped, style, width in terminal cells)."""
    if isinstance(cell, tuple):
        text, style = cell
    elif isinstance(cell, Text):
        text, style = cell.plain, str(cell.style)
    else:
        text, style = printable(cell), ""
    return text, style, len(text) if text.isascii() else cell_len(text)


def _ansi_styler(con: Console) -> Callable[[str, str], str]:
    """``(text, style) → text`` as this console writes it: with the style's escape codes on a
    colour terminal, plain otherwise (each style parsed once)."""
    if con.no_color or con.color_system is None:
        return lambda text, style: text
    system = COLOR_SYSTEMS[con.color_system]
    parsed: dict[str, Style] = {}

    def styled(text: str, style: str) -> str:
        if not style or not text:
            return text
        if style not in parsed:
            parsed[style] = Style.parse(style)
        return parsed[style].render(text, color_system=system)

    return styled


def render_diff(diff: Diff, *, color: bool = False, width: int | None = 120, verbose: bool = False) -> str:
    """``verbose``: every GPU's line, however many (else a difference many GPUs share is one line)."""
    buffer = io.StringIO()
    con = _console(color, width, buffer)
    least = 1 << 30 if verbose else GROUP_FROM  # verbose: no group is ever large enough
    rules, checks, figures = rule_groups(diff, least), check_groups(diff, least), figure_groups(diff, least)
    _diff_header(con, diff, grouped=any(wording.is_grouped(g) for g in (rules, checks, figures)))
    _diff_configuration(con, diff)
    if rules:
        _section(con, "Rule outcomes that changed")
        rows: list[Row] = []
        for rule_group in rules:
            r = rule_group.first
            mark, style = _MARK[r.direction]
            was, now = wording.status_text(r.before), _text(wording.status_text(r.after), style=style)
            subject = wording.group_subject(rule_group, r.subject)
            message = wording.group_message(rule_group)
            rows.append([_text(f"  {mark}", style=style), r.rule, subject, was, "→", now, message])
        _print_table(con, ("", "rule", "subject", "before", "", "after", "message"), rows)
    if checks:
        _section(con, "Smoke checks")
        for check_group in checks:
            c = check_group.first
            change = f"{wording.config_value(c.before)} → {wording.config_value(c.after)}"
            label = (
                c.label if len(check_group.members) == 1 else f"{wording.group_subject(check_group, None)} {c.check}"
            )
            con.print(_text(f"  {label}: {change}", style="red" if c.worse else "yellow"))
    if figures:
        _section(con, f"Smoke figures (noise band ±{diff.noise:.0%})")
        rows = []
        for figure_group in figures:
            fig = figure_group.first
            style = {"slower": "red", "faster": "green"}.get(fig.verdict, "")
            before, after = wording.figure_span(figure_group, False), wording.figure_span(figure_group, True)
            ratio = _text(wording.ratio_span(figure_group), style=style)
            note = _text(wording.FIGURE_NOTES[fig.verdict], style=style or "dim")
            rows.append(["", wording.group_gpus(figure_group), fig.label, before, after, fig.unit, ratio, note])
        _print_table(con, ("", "GPU", "figure", "before", "after", "unit", "ratio", ""), rows)
    _section(con, wording.diff_verdict(diff), "bold red" if diff.worse else "bold green")
    return buffer.getvalue()


def _diff_header(con: Console, diff: Diff, grouped: bool = False) -> None:
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
    for only in diff.gpus_only:
        con.print(_text(f"  ! {wording.gpus_only_note(only)}", style="yellow"))
    if grouped:
        con.print(_text(f"  ({wording.GROUPED_NOTE})", style="dim"))


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
    marks: list[Styled] = [
        (printable(failing or "—"), "red" if failing else "dim"),
        ("!" if node.host in flagged else "", "yellow"),
    ]
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

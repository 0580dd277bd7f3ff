"""Terminal output for ``diff`` and ``fleet`` (rich tables)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cuda_doctor.compare.diff import Diff
from cuda_doctor.compare.fleet import CONFIG_LABELS, Fleet, Node
from cuda_doctor.report.compare import wording

#: Above this many nodes, the node table lists only the ones with something to say.
NODE_TABLE_LIMIT = 50

_MARK = {"worse": ("✗", "red"), "better": ("✓", "green"), "changed": ("•", "yellow")}


def _console(color: bool, width: int | None, buffer: io.StringIO) -> Console:
    # width None: the terminal's, as rich measures it (80 columns into a pipe)
    return Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        width=width,
        highlight=False,
        markup=False,  # messages and values are text: "[...]" in them is not a style tag
        soft_wrap=True,  # long paths stay on one line; tables still fit the width
    )


def _table(*columns: str) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for c in columns:
        table.add_column(c)
    return table


def render_diff(diff: Diff, *, color: bool = False, width: int | None = 120) -> str:
    buffer = io.StringIO()
    con = _console(color, width, buffer)
    _diff_header(con, diff)
    _diff_configuration(con, diff)
    if diff.rules:
        con.print(Text("\nRule outcomes that changed", style="bold"))
        t = _table("", "rule", "subject", "before", "", "after", "message")
        for r in diff.rules:
            mark, style = _MARK[r.direction]
            t.add_row(
                Text(f"  {mark}", style=style),
                r.rule,
                r.subject or "",
                r.before.value if r.before else "—",
                "→",
                Text(r.after.value if r.after else "—", style=style),
                r.message,
            )
        con.print(t)
    if diff.checks:
        con.print(Text("\nSmoke checks", style="bold"))
        for c in diff.checks:
            style = "red" if c.worse else "yellow"
            con.print(
                Text(f"  {c.label}: {wording.config_value(c.before)} → {wording.config_value(c.after)}", style=style)
            )
    if diff.figures:
        con.print(Text(f"\nSmoke figures (noise band ±{diff.noise:.0%})", style="bold"))
        t = _table("", "GPU", "figure", "before", "after", "unit", "ratio", "")
        for fig in diff.figures:
            style = {"slower": "red", "faster": "green"}.get(fig.verdict, "")
            t.add_row(
                "",
                str(fig.gpu),
                fig.label,
                wording.figure_value(fig.before),
                wording.figure_value(fig.after),
                fig.unit,
                Text(wording.ratio(fig.ratio), style=style),
                Text(wording.figure_note(fig), style=style or "dim"),
            )
        con.print(t)
    verdict = wording.diff_verdict(diff)
    con.print()
    con.print(Text(verdict, style="bold red" if diff.worse else "bold green"))
    return buffer.getvalue()


def _diff_header(con: Console, diff: Diff) -> None:
    b, a = diff.before, diff.after
    title = b.host if diff.same_host else f"{b.host} → {a.host}"
    con.print(Text.assemble(("cuda-doctor diff", "bold"), f" {title}" if title else ""))
    con.print(Text(f"  before: {b.path} ({b.created or 'no date'})", style="dim"))
    con.print(Text(f"  after:  {a.path} ({a.created or 'no date'})", style="dim"))
    if not diff.same_host:
        con.print(Text("  ! the two reports come from different hosts", style="yellow"))
    for report in (b, a):
        for note in report.notes:
            con.print(Text(f"  note ({report.path}): {note}", style="dim"))
    skipped = wording.no_results_note(diff)
    if skipped:
        con.print(Text(f"  ! {skipped}", style="yellow"))
    for gap in diff.not_run:
        con.print(Text(f"  ! {wording.not_run_note(gap)}", style="yellow"))


def _diff_configuration(con: Console, diff: Diff) -> None:
    if diff.facts:
        con.print(Text("\nConfiguration", style="bold"))
        t = _table("", "before", "", "after", "")
        for f in diff.facts:
            note = wording.fact_note(f)
            t.add_row(
                f"  {f.label}",
                wording.fact_side(f, False),
                "→",
                wording.fact_side(f, True),
                Text(note, style="red" if note else ""),
            )
        con.print(t)
    if diff.environment:
        con.print(Text("\nEnvironment", style="bold"))
        t = _table("", "before", "", "after", "")
        for e in diff.environment:
            t.add_row(
                f"  {e.variable}",
                wording.env_side(e.before),
                "→",
                wording.env_side(e.after),
                Text(wording.env_note(e), style="red" if e.worse else "yellow"),
            )
        con.print(t)


def _node_row(node: Node, flagged: set[str]) -> list[str | Text]:
    c = node.config
    failing = ", ".join(node.failing)
    return [
        node.host,
        wording.config_value(c.driver),
        wording.config_value(c.torch),
        wording.config_value(c.nccl),
        wording.gpus_text(c.gpu_count, c.gpu_model),
        Text(failing or "—", style="red" if failing else "dim"),
        Text("!" if node.host in flagged else "", style="yellow"),
    ]


def render_fleet(fleet: Fleet, *, color: bool = False, width: int | None = 120, all_nodes: bool = False) -> str:
    """``all_nodes``: list every node, however many (else only the flagged ones above 50)."""
    buffer = io.StringIO()
    con = _console(color, width, buffer)
    con.print(Text("cuda-doctor fleet", style="bold"))
    flagged = {d.host for d in fleet.differing} | {o.host for o in fleet.outliers}
    flagged |= {n.host for n in fleet.failing}
    show_all = all_nodes or len(fleet.nodes) <= NODE_TABLE_LIMIT
    listed = [n for n in fleet.nodes if show_all or n.host in flagged]
    if listed:
        title = (
            "Nodes"
            if show_all
            else (f"Nodes with findings ({len(listed)} of {len(fleet.nodes)}; --all-nodes lists every one)")
        )
        con.print(Text(f"\n{title}", style="bold"))
        t = _table("node", "driver", "torch", "NCCL", "GPUs", "failing rules", "")
        for n in listed:
            t.add_row(*_node_row(n, flagged))
        con.print(t)
    if fleet.majority is not None:
        tie = f"; {wording.tie_note(fleet)}" if fleet.majority_tied else ""
        con.print(
            Text(
                f"\nMajority configuration ({fleet.majority_count} of {len(fleet.nodes)} nodes{tie})",
                style="bold",
            )
        )
        t = _table("", "")
        t.show_header = False
        for key, value in vars(fleet.majority).items():
            t.add_row(f"  {CONFIG_LABELS[key]}", wording.config_value(value))
        con.print(t)
    if fleet.differing:
        con.print(Text("\nNodes that differ from the majority", style="bold"))
        t = _table("", "node", "differs in", "node has", "majority has")
        for d in fleet.differing:
            for i, f in enumerate(d.differences):
                t.add_row(
                    Text("  !", style="yellow"),
                    d.host if i == 0 else "",
                    f.label,
                    Text(wording.config_value(f.value), style="yellow"),
                    wording.config_value(f.majority),
                )
        con.print(t)
    if fleet.outliers:
        con.print(Text("\nPerformance outliers (median and MAD per GPU model)", style="bold"))
        for o in fleet.outliers:
            style = "red" if o.direction == "slow" else "yellow"
            con.print(Text(f"  {o.direction:<4}  {o.host} GPU {o.gpu}: {wording.outlier_text(o)}", style=style))
    if fleet.errors:
        con.print(Text("\nUnreadable reports (left out of the comparison)", style="bold"))
        for e in fleet.errors:
            con.print(Text(f"  ✗ {e}", style="red"))
    if fleet.repeated:
        con.print(Text(f"\n! {wording.repeated_note(fleet)}", style="yellow"))
    if fleet.duplicates:
        con.print(Text(f"\n! more than one report for: {', '.join(fleet.duplicates)}", style="yellow"))
    con.print()
    con.print(Text(wording.fleet_verdict(fleet), style="bold green" if fleet.uniform else "bold yellow"))
    return buffer.getvalue()

"""One task's whole run of the nodes check: rank 0 coordinates and judges, the others follow.
Shared by ``cuda-doctor nodes`` and ``cuda-doctor slurm pre-job``; prints nothing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cuda_doctor.base.errors import UserError
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.config import Config
from cuda_doctor.core.results import Severity
from cuda_doctor.nodes.placement import Placement
from cuda_doctor.nodes.session import Settings, coordinate, finish, follow
from cuda_doctor.nodes.verdict import judge_nodes, node_facts, nodes_facts


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    report: Report | None  # rank 0's; None on the other ranks
    said: str  # what happened, in words (the other ranks' only output, with --verbose)
    node_reports: tuple[Report, ...] = ()  # rank 0: each node's facts, for `cuda-doctor fleet`


def run(
    placement: Placement,
    settings: Settings,
    config: Config,
    fail_on: str,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> Outcome:
    if placement.rank != 0:
        code, said = follow(placement, settings)
        return Outcome(code, None, said)
    try:
        gathered = coordinate(placement, settings)
    except OSError as exc:
        raise UserError(str(exc)) from exc
    try:
        facts, _reports = nodes_facts(gathered)
        report = judge_nodes(facts, config, select, ignore, host=gathered.members[0].host)
        code = report.exit_code(Severity(fail_on))
    except BaseException:
        finish(gathered, 2)  # the others must not wait for a verdict that never comes
        raise
    finish(gathered, code)
    nodes = tuple(
        Report(facts=node_facts(m), results=[], command="facts", host=m.host)
        for m in (gathered.members[rank] for rank in sorted(gathered.members))
    )
    return Outcome(code, report, "rank 0 judged the nodes", nodes)


def save_reports(folder: Path, reports: Iterable[Report], fail_on: str) -> None:
    """Each node's report as ``rank<N>-<host>.json`` in ``folder`` (``cuda-doctor fleet FOLDER`` reads them)."""
    from cuda_doctor.base import atomic
    from cuda_doctor.report.check.json import render_json

    try:
        folder.mkdir(parents=True, exist_ok=True)
        for rank, report in enumerate(reports):
            name = f"rank{rank}-{report.host}.json".replace("/", "_")
            atomic.write_text(folder / name, render_json(report, Severity(fail_on)))
    except OSError as exc:
        raise UserError(f"cannot write the nodes' reports into {folder}: {exc.strerror or exc}") from exc

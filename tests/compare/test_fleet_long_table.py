"""``fleet`` text of a large fleet: the node table laid out without rich's per-cell layout (which
took 20 s for 20,000 nodes), line for line as rich lays it out."""

from __future__ import annotations

import pytest
from compare_reports import base_report, failing_rule, other_driver, write

import cuda_doctor.report.compare.text as text
from cuda_doctor.compare.fleet import FLEET_FIELDS, Fleet, compare_fleet
from cuda_doctor.core.reportfile import load_many

HOSTS = 260  # more rows than rich lays out (RICH_TABLE_ROWS)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    folder = tmp_path_factory.mktemp("fleet")
    for i in range(HOSTS):
        report = base_report(host=f"node{i:03d}\x1b[31m" if i == 5 else f"node{i:03d}", gpus=2)
        if i % 50 == 3:
            report = other_driver(report)
        if i % 70 == 1:
            report = failing_rule(report)
        write(folder / f"node{i:03d}.json", report)
    reports, errors = load_many(sorted(folder.iterdir()), FLEET_FIELDS)
    return compare_fleet(reports, errors)


def lines(output: str) -> list[str]:
    return [line.rstrip() for line in output.splitlines()]


def test_the_long_table_is_rich_layout_line_for_line(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    assert text.RICH_TABLE_ROWS < HOSTS
    fast = text.render_fleet(fleet, width=200, all_nodes=True)
    monkeypatch.setattr(text, "RICH_TABLE_ROWS", HOSTS + 1)
    assert lines(fast) == lines(text.render_fleet(fleet, width=200, all_nodes=True))


def test_one_line_per_node_with_its_controls_escaped(fleet: Fleet) -> None:
    out = text.render_fleet(fleet, width=80, all_nodes=True)  # a pipe's width: still one line per node
    for i in (0, 3, 71, 259):
        (row,) = [line for line in out.splitlines() if line.startswith(f"node{i:03d} ")]
        assert "2× NVIDIA H200" in row
    assert "\x1b" not in out and "node005\\x1b[31m" in out


def test_colour_only_on_a_terminal(fleet: Fleet) -> None:
    coloured = text.render_fleet(fleet, width=200, all_nodes=True, color=True)
    (row,) = [line for line in coloured.splitlines() if line.startswith("node071 ")]
    assert "\x1b[31mCD310 (GPU 0)\x1b[0m" in row  # a failing rule in red, as rich styles it
    assert lines(text.render_fleet(fleet, width=200, all_nodes=True)) != lines(coloured)

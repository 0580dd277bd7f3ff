"""Facts-only reports, lost frameworks, repeated paths, ties and wording."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from compare_reports import (
    base_report,
    facts_report,
    failing_rule,
    other_driver,
    other_torch,
    torch_missing,
    write,
)

from cuda_doctor.commands.diff import command as diff_command
from cuda_doctor.commands.fleet import command as fleet_command
from cuda_doctor.compare.diff import diff_reports
from cuda_doctor.compare.fleet import compare_fleet
from cuda_doctor.core.reportfile import load_report, load_unique
from cuda_doctor.report.compare.text import render_diff, render_fleet


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def _write(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    return str(write(tmp_path / name, data))


# 1. A report without rule results: facts only, no rule "fixed".


def test_diff_against_a_facts_report_claims_no_fixes(runner: CliRunner, tmp_path: Path) -> None:
    check = _write(tmp_path, "a.json", failing_rule(base_report(), rule="CD101"))
    facts = _write(tmp_path, "facts.json", facts_report(other_driver(base_report())))
    result = runner.invoke(diff_command, [check, facts])
    out = result.output
    assert "second report has no rule results (facts only)" in out
    assert "CD101" not in out and "fixed" not in out
    assert "570.195.03" in out  # the facts are still compared
    assert "rule outcomes not compared" in out
    data = json.loads(runner.invoke(diff_command, [check, facts, "--format", "json"]).output)
    assert data["rules"] == [] and data["summary"]["rules_fixed"] == 0
    assert data["rules_compared"] is False and data["without_results"] == [facts]


def test_facts_report_on_the_first_side_is_named_too(tmp_path: Path) -> None:
    before = load_report(write(tmp_path / "f.json", facts_report(base_report())))
    after = load_report(write(tmp_path / "c.json", failing_rule(base_report())))
    d = diff_reports(before, after)
    assert d.rules == () and not d.worse and not d.rules_compared
    assert "first report has no rule results" in render_diff(d)


# 2. A key fact that becomes unknown or not installed is worse.


def test_torch_gone_shows_not_installed_and_is_worse(runner: CliRunner, tmp_path: Path) -> None:
    b = _write(tmp_path, "b.json", other_torch(base_report(), version="2.13.0+cpu", cuda="", nccl=""))
    a = _write(tmp_path, "a.json", torch_missing(base_report()))
    result = runner.invoke(diff_command, [b, a])
    assert result.exit_code == 1, result.output
    torch_line = next(line for line in result.output.splitlines() if line.strip().startswith("torch "))
    assert "2.13.0+cpu" in torch_line and "not installed" in torch_line
    assert "unknown" not in torch_line
    assert "worse:" in result.output and "nothing got worse" not in result.output


def test_known_fact_becoming_unknown_is_worse(tmp_path: Path) -> None:
    after = base_report()
    del after["facts"]["values"]["gpu.count"]
    d = diff_reports(
        load_report(write(tmp_path / "b.json", base_report())), load_report(write(tmp_path / "a.json", after))
    )
    assert [f.name for f in d.lost_facts] == ["gpu.count"] and d.worse
    # The other way round is new knowledge, not a regression.
    back = diff_reports(d.after, d.before)
    assert back.facts and not back.lost_facts and not back.worse


# 3. The same file twice is one node.


def test_fleet_reads_a_repeated_path_once(runner: CliRunner, tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json", base_report(host="a"))
    same = str(tmp_path / "." / "a.json")
    reports, errors, repeated = load_unique([a, same])
    assert len(reports) == 1 and not errors and repeated == [same]
    result = runner.invoke(fleet_command, [a, a])
    assert result.exit_code == 0, result.output
    assert "1 node," in result.output and "2 nodes" not in result.output
    assert f"given more than once, counted once: {a}" in result.output
    data = json.loads(runner.invoke(fleet_command, [a, a, "--format", "json"]).output)
    assert data["summary"]["nodes"] == 1 and data["repeated"] == [a]


# 4. The majority is never the all-unknown configuration; ties are said and deterministic.


def _empty_report(host: str) -> dict[str, Any]:
    return {"values": {"system.hostname": host}, "unknown": {"driver.version": "no driver"}}


def test_all_unknown_configuration_is_never_the_majority(tmp_path: Path) -> None:
    paths = [
        write(tmp_path / "x1.json", _empty_report("x1")),
        write(tmp_path / "x2.json", _empty_report("x2")),
        write(tmp_path / "k.json", base_report(host="k")),
    ]
    for order in (paths, paths[::-1]):
        reports, _, _ = load_unique(order)
        fleet = compare_fleet(reports)
        assert fleet.majority is not None and fleet.majority.driver == "580.159.04"
        assert fleet.majority_count == 1
        assert sorted(d.host for d in fleet.differing) == ["x1", "x2"]


def test_tie_is_said_and_broken_the_same_way_in_any_order(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", base_report(host="a"))
    b = write(tmp_path / "b.json", other_driver(base_report(host="b")))
    picks = set()
    for order in ([a, b], [b, a]):
        reports, _, _ = load_unique(order)
        fleet = compare_fleet(reports)
        assert fleet.majority_tied and len(fleet.tied_with) == 1
        assert fleet.majority is not None
        picks.add(fleet.majority.driver)
        assert "tie: 1 other configuration with 1 nodes each" in render_fleet(fleet)
    assert len(picks) == 1


# 5. Exit status of fleet: documented, and --fail-on-difference trips on failing rules.


def test_fleet_exit_status_is_documented_and_failing_rules_trip_the_flag(runner: CliRunner, tmp_path: Path) -> None:
    for i in range(3):
        report = base_report(host=f"n{i}")
        write(tmp_path / f"n{i}.json", failing_rule(report) if i == 1 else report)
    assert runner.invoke(fleet_command, [str(tmp_path)]).exit_code == 0
    assert runner.invoke(fleet_command, [str(tmp_path), "--fail-on-difference"]).exit_code == 1
    help_text = " ".join(runner.invoke(fleet_command, ["--help"]).output.split())
    assert "0 by default, even when nodes have failing rules" in help_text
    docs = Path(__file__).parents[2] / "docs" / "compare.md"
    assert "even when nodes have failing rules" in " ".join(docs.read_text().split())


# 6. Wording.


def test_diff_title_has_single_spaces(runner: CliRunner, tmp_path: Path) -> None:
    p = _write(tmp_path, "a.json", base_report(host="vm"))
    first = runner.invoke(diff_command, [p, p]).output.splitlines()[0]
    assert first == "cuda-doctor diff vm"


def test_noise_default_shows_as_a_percentage(runner: CliRunner) -> None:
    for cmd in (diff_command, fleet_command):
        out = " ".join(runner.invoke(cmd, ["--help"]).output.split())
        assert "[default: 5%]" in out and "[default: (5%)]" not in out


def test_top_level_help_shows_whole_summaries(runner: CliRunner) -> None:
    from cuda_doctor.cli import cli

    out = runner.invoke(cli, ["--help"], terminal_width=80).output
    for name in ("diff", "fleet"):
        line = next(x for x in out.splitlines() if re.match(rf"\s+{name}\s", x))
        assert not line.rstrip().endswith("..."), line
        summary = (diff_command if name == "diff" else fleet_command).help or ""
        assert len(summary.splitlines()[0]) < 60

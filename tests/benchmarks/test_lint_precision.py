"""benchmarks/lint_precision.py: stable finding keys, precision arithmetic, labels, and one real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import lint_precision as lp


def record(path: str = "train.py", line: int = 1, rule: str = "CDL001", severity: str = "warning") -> lp.Record:
    return lp.Record("o/n", path, rule, severity, line, 1, "message", None)


def keyed(lines: list[str], at: list[int]) -> list[str]:
    records = [record(line=n) for n in at]
    lp.assign_keys(records, lambda r: lines[r.line - 1])
    return [r.key for r in records]


def test_key_survives_a_line_shift() -> None:
    before = keyed(["import torch", "s = torch.cuda.amp.GradScaler()"], [2])
    after = keyed(["import torch", "", "# a comment", "    s = torch.cuda.amp.GradScaler()  "], [4])
    assert before == after
    assert before[0].startswith("o/n|train.py|CDL001|") and before[0].endswith("|0")


def test_repeats_of_one_line_count_up_in_line_order() -> None:
    lines = ["x = DataLoader(d)", "y = 1", "x = DataLoader(d)"]
    keys = keyed(lines, [3, 1])  # given out of order: the counter follows the line order
    assert [k.rsplit("|", 1)[1] for k in keys] == ["1", "0"]
    assert keys[0].rsplit("|", 1)[0] == keys[1].rsplit("|", 1)[0]


def test_a_different_line_text_is_a_different_key() -> None:
    assert keyed(["a = 1"], [1]) != keyed(["a = 2"], [1])


def test_tally_precision_strict_and_lenient() -> None:
    rows = [("CDL001", "right")] * 3 + [("CDL001", "wrong"), ("CDL001", "debatable"), ("CDL001", None)]
    rows += [("CDL008", "wrong")]
    table = lp.tally(rows)
    one = table["CDL001"]
    assert (one.findings, one.labelled, one.unlabelled) == (6, 5, 1)
    assert one.strict == pytest.approx(3 / 5)
    assert one.lenient == pytest.approx(4 / 5)
    assert table["CDL008"].strict == 0.0
    assert table["all"].findings == 7 and table["all"].strict == pytest.approx(3 / 6)


def test_tally_without_labels_has_no_precision() -> None:
    table = lp.tally([("CDL003", None)])
    assert table["CDL003"].strict is None and lp.percent(table["CDL003"].lenient) == "—"


def test_labels_reject_an_unknown_label_and_a_key_given_twice(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"key": "k", "label": "maybe"}) + "\n")
    with pytest.raises(ValueError, match="label must be one of"):
        lp.read_labels(bad)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(json.dumps({"key": "k", "label": "right"}) + "\n" + json.dumps({"key": "k", "label": "wrong"}))
    with pytest.raises(ValueError, match="labelled twice"):
        lp.read_labels(twice)


def test_accepted_is_right_at_its_severity_or_debatable_info_the_label_asks_for(tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text(
        json.dumps({"key": "a", "label": "right"})
        + "\n"
        + json.dumps({"key": "b", "label": "right", "severity": "warning"})
        + "\n"
    )
    new.write_text(
        json.dumps({"key": "c", "label": "debatable", "severity": "info"})
        + "\n"
        + json.dumps({"key": "d", "label": "debatable"})
        + "\n"
    )
    labels = lp.read_labels([old, new])
    info = record(severity="info")
    assert lp.is_accepted(record(), labels["a"]) and lp.is_accepted(info, labels["a"])
    assert lp.is_accepted(record(), labels["b"]) and not lp.is_accepted(info, labels["b"])
    assert lp.is_accepted(info, labels["c"]) and not lp.is_accepted(record(), labels["c"])
    assert not lp.is_accepted(info, labels["d"]) and not lp.is_accepted(info, None)
    table = lp.tally([("CDL001", "right", True), ("CDL001", "debatable", False)])
    assert table["CDL001"].accepted == 1 and table["CDL001"].accepted_share == pytest.approx(0.5)
    with pytest.raises(ValueError, match="labelled twice"):
        lp.read_labels([old, old])


def test_alone_differences_are_a_multiset_difference() -> None:
    whole = [record(line=1), record(line=1), record(line=5, rule="CDL003")]
    alone = [record(line=1), record(line=5, rule="CDL003", severity="info")]
    diff = lp.diff_file("o/n", "train.py", whole, alone)
    assert [(r.line, r.rule, r.severity) for r in diff.only_whole] == [
        (1, "CDL001", "warning"),
        (5, "CDL003", "warning"),
    ]
    assert [(r.line, r.severity) for r in diff.only_alone] == [(5, "info")]


def test_pick_keeps_files_with_findings_and_spreads_the_rest() -> None:
    files = [f"f{i}.py" for i in range(10)]
    assert lp.pick(files, {"f3.py"}, 3) == ["f0.py", "f3.py", "f4.py", "f7.py"]
    assert lp.pick(files, set(), None) == sorted(files)


def test_expected_findings_match_repo_path_rule_and_line() -> None:
    records = [record(line=7, rule="CDL006")]
    item = {"repo": "o/n", "path": "train.py", "rule": "CDL006", "line": 7}
    assert lp.expected_found(records, item)
    assert lp.expected_found(records, {**item, "rule": "*", "line": [3, 7]})
    assert not lp.expected_found(records, {**item, "rule": "CDL002"})
    assert not lp.expected_found(records, {**item, "line": 8})


def test_lint_kind_names() -> None:
    assert lp.lint_kind("train.py", "src") and lp.lint_kind("Dockerfile.cuda", "docker")
    assert lp.lint_kind("base.txt", "requirements") and lp.lint_kind("requirements-dev.in", "x")
    assert not lp.lint_kind("README.md", "x") and not lp.lint_kind("notes.txt", "docs")
    assert lp.workflow_file(".github/workflows/ci.yml") and not lp.workflow_file(".github/dependabot.yml")


def test_a_real_run_dumps_keys_that_the_labels_match(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkout = tmp_path / "corpus" / "someone__trainer"
    checkout.mkdir(parents=True)
    (checkout / "train.py").write_text("import torch\n\nscaler = torch.cuda.amp.GradScaler()\n")
    dump = tmp_path / "findings.jsonl"
    assert lp.main([str(tmp_path / "corpus"), "--dump", str(dump), "-j", "1"]) == 0
    items = [json.loads(t) for t in dump.read_text().splitlines()]
    deprecated = [i for i in items if i["rule"] == "CDL001"]
    assert len(deprecated) == 1 and deprecated[0]["repo"] == "someone/trainer" and deprecated[0]["line"] == 3
    assert any(c.startswith(">     3 scaler") for c in deprecated[0]["context"])
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"key": deprecated[0]["key"], "label": "right", "reason": "deprecated"}) + "\n")
    capsys.readouterr()
    assert lp.main([str(tmp_path / "corpus"), "--labels", str(labels), "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "Labelled findings no longer reported: 0" in out
    precision = out.split("Precision per rule", 1)[1]
    rule_row = next(line for line in precision.splitlines() if line.startswith("CDL001"))
    assert rule_row.split()[1:4] == ["1", "1", "1"] and "100%" in rule_row


@pytest.mark.parametrize(
    ("manifest", "labelled"),
    [("repositories.txt", "labels.jsonl"), ("repositories-held-out.txt", "labels-held-out.jsonl")],
)
def test_the_labelled_sample_is_well_formed(manifest: str, labelled: str) -> None:
    sample = Path(lp.__file__).parent / "lint_sample"
    entries = [line.split() for line in (sample / manifest).read_text().splitlines() if line[:1] != "#"]
    assert entries and all(len(e) == 2 and len(e[1]) == 40 and e[0].count("/") == 1 for e in entries)
    repositories = {name for name, _ in entries}
    assert len(repositories) == len(entries)
    labels = lp.read_labels(sample / labelled)  # also: known labels, no key twice
    assert {key.split("|", 1)[0] for key in labels} <= repositories
    assert all(label.reason for label in labels.values())

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compare_reports import RECORDED, base_report, write

from cuda_doctor.core.reportfile import SCHEMA_VERSION, ReportFileError, load_many, load_report
from cuda_doctor.core.results import Status


def test_base_report_carries_the_recorded_h200_figures() -> None:
    values = base_report()["facts"]["values"]
    assert values["driver.version"] == "580.159.04"
    assert values["torch.version"] == "2.11.0+cu130"
    assert values["torch.cudnn_version"] == 91900
    assert values["torch.nccl_version"] == "2.28.9"
    assert values["gpu[0].name"] == "NVIDIA H200"
    assert (RECORDED["bf16"], RECORDED["fp16"], RECORDED["fp32"]) == (768.6, 734.9, 51.0)
    assert values["smoke[0].h2d_pinned_gbps"] == pytest.approx(55.2, abs=0.01)
    assert values["smoke[0].h2d_pageable_gbps"] == pytest.approx(18.1, abs=0.1)
    assert values["smoke[0].launch_us"] == pytest.approx(7.64)


def test_reads_a_valid_report(tmp_path: Path) -> None:
    report = load_report(write(tmp_path / "a.json", base_report(host="n1")))
    assert report.host == "n1"
    assert report.schema_version == SCHEMA_VERSION
    assert report.tool_version == "cuda-doctor 0.1.0"
    assert report.get("driver.version") == "580.159.04"
    assert report.unknown["tensorflow.version"] == "tensorflow is not installed"
    assert {r.rule_id for r in report.results} == {"CD101", "CD201", "CD310", "CD120"}
    assert report.results[0].status is Status.PASS


def test_reads_what_the_check_pipeline_writes(tmp_path: Path) -> None:
    from cuda_doctor.core.checkreport import Report as PipelineReport
    from cuda_doctor.core.facts import Facts
    from cuda_doctor.core.results import Result

    facts = Facts()
    facts.set("driver.version", "580.159.04")
    facts.mark_unknown("torch.version", "torch is not installed")
    result = Result("CD101", "Driver", "driver", Status.FAIL, "too old", subject="GPU 0")
    written = PipelineReport(facts=facts, results=[result], host="pipe-node").to_dict()
    report = load_report(write(tmp_path / "p.json", written))
    assert report.host == "pipe-node"
    assert report.results == (result,)
    assert report.unknown == {"torch.version": "torch is not installed"}


def _error(path: Path) -> str:
    with pytest.raises(ReportFileError) as info:
        load_report(path)
    assert str(path) in str(info.value)
    return info.value.reason


def test_truncated_file_is_named_and_called_truncated(tmp_path: Path) -> None:
    text = json.dumps(base_report(), indent=2)
    for cut in (len(text) // 3, len(text) - 2):
        path = tmp_path / f"cut{cut}.json"
        path.write_text(text[:cut])
        assert "truncated" in _error(path)


def test_non_json_and_other_json(tmp_path: Path) -> None:
    text = tmp_path / "text.json"
    text.write_text("Driver Version: 580.159.04\n")
    assert "not JSON" in _error(text)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert "not UTF-8" in _error(binary)
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    assert "empty" in _error(empty)
    array = tmp_path / "array.json"
    array.write_text("[1, 2]")
    assert "array" in _error(array)
    other = tmp_path / "other.json"
    other.write_text('{"name": "something else"}')
    assert "not a cuda-doctor report" in _error(other)
    assert "cannot read" in _error(tmp_path / "missing.json")


def test_newer_schema_says_upgrade(tmp_path: Path) -> None:
    data = base_report()
    data["schema_version"] = SCHEMA_VERSION + 1
    data["tool"]["version"] = "0.9.0"
    reason = _error(write(tmp_path / "new.json", data))
    assert f"schema version {SCHEMA_VERSION + 1}" in reason
    assert "newer" in reason and "cuda-doctor 0.9.0" in reason
    assert "upgrade cuda-doctor" in reason


def test_bad_schema_version_and_missing_facts(tmp_path: Path) -> None:
    data = base_report()
    data["schema_version"] = "one"
    assert "schema_version" in _error(write(tmp_path / "v.json", data))
    data = base_report()
    del data["facts"]
    assert "facts.values" in _error(write(tmp_path / "f.json", data))


def test_unknown_result_status_is_left_out_with_a_note(tmp_path: Path) -> None:
    data = base_report()
    data["results"][0]["status"] = "flaky"  # a status some later version might add
    report = load_report(write(tmp_path / "s.json", data))
    assert len(report.results) == 3
    assert "1 result(s)" in report.notes[0]


def test_lenient_reading_of_minimal_and_facts_only_files(tmp_path: Path) -> None:
    data = base_report(host="n7")
    for key in ("results", "summary", "tool", "created", "host"):
        del data[key]
    report = load_report(write(tmp_path / "min.json", data))
    assert report.host == "n7"  # from system.hostname
    assert report.results == () and report.created is None
    dump = {"values": {"driver.version": "580.159.04"}, "unknown": {}}
    facts_only = load_report(write(tmp_path / "node9.json", dump))
    assert facts_only.host == "node9"  # from the file name
    assert facts_only.schema_version == 0 and facts_only.notes


def test_load_many_expands_directories_and_keeps_going(tmp_path: Path) -> None:
    write(tmp_path / "a.json", base_report(host="a"))
    write(tmp_path / "b.json", base_report(host="b"))
    (tmp_path / "c.json").write_text("{")
    (tmp_path / "notes.txt").write_text("ignored: not *.json")
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    reports, errors = load_many([tmp_path, empty])
    assert [r.host for r in reports] == ["a", "b"]
    assert [Path(e.path).name for e in errors] == ["empty-dir", "c.json"]

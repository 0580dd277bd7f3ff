"""Reading a report file back: bounded, and one message for one broken file whoever reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cuda_doctor.base.errors import UserError
from cuda_doctor.cli import cli
from cuda_doctor.core.reportfile import MAX_BYTES, SCHEMA, SCHEMA_VERSION, ReportFileError, load_report

H200_FACTS = Path(__file__).parents[1] / "rules" / "h200_facts.json"


def _reason(path: Path | str) -> str:
    with pytest.raises(ReportFileError) as info:
        load_report(path)
    assert str(info.value).startswith(f"{path}: ")
    assert isinstance(info.value, UserError)  # the boundary turns it into one line and exit 2
    return info.value.reason


def test_a_file_larger_than_the_cap_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: the size is real, no disk is spent
    assert f"larger than {MAX_BYTES // 2**20} MiB" in _reason(big)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    assert "not a regular file" in _reason(fifo)


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    assert "not a regular file" in _reason("/dev/zero")
    assert "is a directory" in _reason(tmp_path)


def test_deep_nesting_is_an_error_not_a_recursion_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert "nested too deeply" in _reason(deep)
    deep.write_text('{"facts": {"values": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}}")
    assert "nested too deeply" in _reason(deep)


def test_a_number_too_long_to_convert_is_not_valid_json(tmp_path: Path) -> None:
    path = tmp_path / "digits.json"
    path.write_text('{"facts": {"values": {"x": ' + "1" * 10_000 + "}}}")
    assert "not valid JSON" in _reason(path)


def test_a_facts_document_without_a_schema_reads_as_a_report(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"facts": json.loads(H200_FACTS.read_text())}))
    saved = load_report(path)
    assert saved.schema_version == SCHEMA_VERSION
    assert saved.get("driver.version") == "580.159.04"
    assert saved.host == "h200-node"  # from system.hostname: the machine the facts describe
    assert "no 'schema' field" in saved.notes[0]


def test_bad_unknown_and_other_schemas_are_named(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema": SCHEMA, "schema_version": 1, "facts": {"values": {}, "unknown": []}}))
    assert "'unknown' must be an object" in _reason(path)
    path.write_text(json.dumps({"schema": "cuda-doctor/watch-report", "schema_version": 1}))
    assert "schema is 'cuda-doctor/watch-report'" in _reason(path)
    path.write_text(json.dumps({"schema": SCHEMA, "schema_version": 1, "facts": {"values": {}}, "results": [{}]}))
    assert "no 'rule' id" in _reason(path)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "Driver Version: 580",
        '{"facts": {"values": ',
        "[1, 2]",
        '{"schema": "cuda-doctor/report", "schema_version": 9}',
    ],
)
def test_check_diff_and_fleet_say_the_same_about_the_same_file(tmp_path: Path, content: str) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(content)
    expected = f"cuda-doctor: error: {broken}: {_reason(broken)}"
    runner = CliRunner()
    for argv in (["check", "--facts", str(broken)], ["diff", str(broken), str(broken)]):
        result = runner.invoke(cli, argv)
        assert result.exit_code == 2
        assert result.output.strip() == expected
    fleet = runner.invoke(cli, ["fleet", str(broken)])
    assert fleet.exit_code == 2 and f"{broken}: {_reason(broken)}" in fleet.output


def test_check_facts_from_a_fifo_ends_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", "--facts", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,  # a read that waited for a writer would never end
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "not a regular file" in proc.stderr and "Traceback" not in proc.stderr

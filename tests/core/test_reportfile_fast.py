"""The report reader's fast path: msgspec when installed, fields kept, worker processes.  Each
gives what the plain path gives: the same values, the same errors, in the same order."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from compare_reports import base_report, failing_rule, write

from cuda_doctor.core import reportfile
from cuda_doctor.core.reportfile import Fields, ReportFileError, load_report, load_unique
from cuda_doctor.core.results import Status


@pytest.fixture
def with_msgspec() -> None:
    pytest.importorskip("msgspec", reason="the fast path needs msgspec (the test extra installs it)")


def stdlib_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reportfile, "fast_decoder", lambda: None)


def outcome(path: Path, fields: Fields | None = None) -> Any:
    try:
        return load_report(path, fields)
    except ReportFileError as exc:
        return ("error", exc.reason)


def body(values: str, results: str = "[]") -> bytes:
    return (
        b'{"schema": "cuda-doctor/report", "schema_version": 1, "facts": {"values": '
        + values.encode()
        + b', "unknown": {}}, "results": '
        + results.encode()
        + b"}"
    )


#: Documents where JSON decoders are known to differ: each must read as the standard library reads it.
TRICKY = [
    body('{"x": NaN, "y": Infinity, "z": -Infinity}'),
    body('{"x": 123456789012345678901234567890, "y": -9223372036854775809}'),
    body('{"x": 1e400, "y": 1e-400, "z": -0.0, "w": 5e-324}'),
    body('{"x": "\\ud800", "y": "\\u0000", "z": "\\udc00\\ud800"}'),
    body('{"x": 1, "x": 2}'),
    body('{"x": "' + "1" * 5000 + '"}'),
    body('{"x": ' + "1" * 5000 + "}"),
    body('{"x": ' + "[" * 600 + "]" * 600 + "}"),
    b"\xef\xbb\xbf" + body("{}"),
    body('{"x": "a"}').replace(b'"a"', b'"\xff"'),
    body('{"x": "a"}').replace(b'"a"', b'"\xed\xa0\x80"'),
    body('{"x": "a"}').replace(b'"a"', b'"\xc0\xaf"'),
    body('{"x": "tab\there"}'),
    body('{"x": 01}'),
    body('{"x": [1,]}'),
    body("{}") + b" trailing",
    body("{}")[:-5],
    b"",
    b"   \n",
    b"[1, 2]",
    b'"just a string"',
    body("{}", '[{"rule": "CD1", "status": "pass", "commands": 5}]'),
    body("{}", '[{"rule": "CD1", "status": "pass", "evidence": "ab"}]'),
    body("{}", '[{"rule": "CD1", "status": "pass", "evidence": [["a", 1]]}]'),
    body("{}", '[{"rule": "CD1", "status": null}]'),
    body("{}", '[{"rule": "CD1", "status": ["pass"]}]'),
    body("{}", '[{"rule": "CD1", "status": "brand-new"}]'),
    body("{}", '[{"rule": "CD1"}]'),
    body("{}", '[{"status": "pass"}]'),
]


@pytest.mark.parametrize("raw", TRICKY, ids=range(len(TRICKY)))
@pytest.mark.usefixtures("with_msgspec")
def test_msgspec_reads_every_document_as_the_standard_library_does(
    tmp_path: Path, raw: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(raw)
    assert reportfile.fast_decoder() is not None
    fast = outcome(path)
    fast_fields = outcome(path, Fields(facts=dict, statuses=frozenset({Status.FAIL})))
    stdlib_only(monkeypatch)
    slow = outcome(path)
    assert repr(fast) == repr(slow)  # repr: NaN is not equal to itself
    assert repr(fast_fields) == repr(outcome(path, Fields(facts=dict, statuses=frozenset({Status.FAIL}))))
    if type(slow) is tuple:  # an error (a SavedReport is a named tuple): the same with fields as without
        assert fast_fields == slow


@pytest.mark.usefixtures("with_msgspec")
def test_a_report_reads_the_same_with_and_without_msgspec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "a.json", failing_rule(base_report(gpus=8)))
    fast = load_report(path)
    stdlib_only(monkeypatch)
    assert load_report(path) == fast


def test_without_msgspec_the_standard_library_reads(tmp_path: Path) -> None:
    path = write(tmp_path / "a.json", base_report())
    script = (
        "import sys; sys.modules['msgspec'] = None\n"  # as if it were not installed
        "from cuda_doctor.core.reportfile import fast_decoder, load_report\n"
        f"assert fast_decoder() is None\nprint(load_report({str(path)!r}).host)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gpu-node-01"


def fleet_fields() -> Fields:
    from cuda_doctor.compare.fleet import FLEET_FIELDS

    return FLEET_FIELDS


def test_fields_keep_what_was_asked_and_check_everything(tmp_path: Path) -> None:
    path = write(tmp_path / "a.json", failing_rule(base_report(gpus=2)))
    full = load_report(path)
    kept = load_report(path, fleet_fields())
    assert set(kept.values) < set(full.values)
    assert kept.values["driver.version"] == full.values["driver.version"]
    assert kept.values["smoke[1].bf16_tflops"] == full.values["smoke[1].bf16_tflops"]
    assert kept.unknown == {}
    kept_statuses = (Status.FAIL, Status.ERROR, Status.WARN)
    assert [r.rule_id for r in kept.results] == [r.rule_id for r in full.results if r.status in kept_statuses]
    assert [r.rule_id for r in kept.results] == ["CD310"]
    assert (kept.host, kept.created, kept.notes) == (full.host, full.created, full.notes)
    broken = failing_rule(base_report())
    broken["results"][0]["links"] = 7  # a passing result, malformed: an error however it is read
    write(path, broken)
    with pytest.raises(ReportFileError) as plain:
        load_report(path)
    with pytest.raises(ReportFileError) as picked:
        load_report(path, fleet_fields())
    assert str(picked.value) == str(plain.value)


def many(tmp_path: Path, n: int) -> list[Path]:
    folder = tmp_path / "reports"
    folder.mkdir()
    paths = [write(folder / f"n{i:03d}.json", base_report(host=f"n{i:03d}")) for i in range(n)]
    (folder / "n005.json").write_text("{")  # unreadable ones keep their place among the errors
    (folder / "n017.json").write_text("[]")
    return paths


def test_worker_processes_give_the_same_reports_and_errors_in_order(tmp_path: Path) -> None:
    paths = many(tmp_path, 40)
    folder = paths[0].parent
    serial = load_unique([folder, paths[3]], fleet_fields(), jobs=1)
    parallel = load_unique([folder, paths[3]], fleet_fields(), jobs=3)
    assert parallel[0] == serial[0] and len(serial[0]) == 38
    assert [(e.path, e.reason) for e in parallel[1]] == [(e.path, e.reason) for e in serial[1]]
    assert [Path(e.path).name for e in serial[1]] == ["n005.json", "n017.json"]
    assert parallel[2] == serial[2] == [str(paths[3])]


def test_a_report_file_error_survives_the_way_back_from_a_worker() -> None:
    error = pickle.loads(pickle.dumps(ReportFileError("a/b.json", "truncated JSON")))
    assert (error.path, error.reason, str(error)) == ("a/b.json", "truncated JSON", "a/b.json: truncated JSON")


def test_a_folder_lists_its_json_entries_as_a_glob_would(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    for name in ("b.json", "a.json", ".hidden.json", "c.JSON", "notes.txt", "10.json", "9.json"):
        (folder / name).write_text(json.dumps(base_report(host=name)))
    (folder / "sub.json").mkdir()
    (folder / "link.json").symlink_to(folder / "a.json")
    (folder / "dangling.json").symlink_to(folder / "missing.json")
    reports, errors, repeated = load_unique([folder])
    shown = [r.path for r in reports] + [e.path for e in errors] + repeated
    assert sorted(shown) == sorted(map(str, folder.glob("*.json")))  # every entry, each once
    assert repeated == [str(folder / "link.json")]  # the same file as a.json, read once
    assert {Path(e.path).name for e in errors} == {"sub.json", "dangling.json"}  # named, not skipped

"""``--format prometheus``: read back with prometheus_client's own parser of the text format."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from cuda_doctor.cli import cli
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.config import Config
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import judge_facts
from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report.check import render
from cuda_doctor.report.prometheus import HELP

TESTS = Path(__file__).resolve().parents[1]
H200_FACTS = TESTS / "rules" / "h200_facts.json"
#: What the smoke run measured on GPU 0 of an H200 (the figures' order of magnitude).
SMOKE = {
    "smoke[0].uuid": "GPU-3d95cf99-d22a-5850-a342-8583fdfbb084",
    "smoke[0].bf16_tflops": 612.5,
    "smoke[0].fp32_tflops": 49.25,
    "smoke[0].h2d_pinned_gbps": 52.5,
    "smoke[0].d2h_pinned_gbps": 53.0,
    "smoke[0].h2d_pageable_gbps": 20.25,
    "smoke[0].launch_us": 4.5,
    "smoke[0].alloc_ok": True,
    "smoke[0].bf16_ok": False,
    "probe.gpu.seconds": 0.03,
}


def h200_report(*, seconds: float | None = 1.25, **changes: object) -> Report:
    data = json.loads(H200_FACTS.read_text(encoding="utf-8"))
    facts = Facts.from_dict(data)
    for name, value in {**SMOKE, **changes}.items():
        facts.set(name, value)
    results, _ = judge_facts(facts, Config())
    return Report(facts=facts, results=results, seconds=seconds, created="2026-12-02T01:02:03+00:00", host="node-7")


def parsed(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [(sample.labels, sample.value) for sample in parsed(text)[name].samples]


def test_every_family_is_a_documented_gauge_with_a_conventional_name() -> None:
    text = render(h200_report(), "prometheus")
    families = parsed(text)
    assert set(families) == {f"cuda_doctor_{name}" for name in HELP}
    for name, family in families.items():
        assert family.type == "gauge" and family.documentation == HELP[name.removeprefix("cuda_doctor_")]
        assert re.fullmatch("cuda_doctor_[a-z][a-z0-9_]*", name) and not name.endswith("_total")
    assert text.endswith("\n") and "\n\n" not in text


def test_each_rule_has_exactly_one_series_with_its_worst_status() -> None:
    report = h200_report(**{"system.shm_bytes": 64 * 2**20})
    rules = {r.rule_id for r in report.results}
    series = samples(render(report, "prometheus"), "cuda_doctor_check")
    assert sorted(labels["rule"] for labels, _ in series) == sorted(rules)
    assert all(value == 1 for _, value in series)
    statuses = {labels["rule"]: labels["status"] for labels, _ in series}
    assert statuses["CD502"] == "fail" and statuses["CD102"] == "pass"
    exit_code = samples(render(report, "prometheus"), "cuda_doctor_check_exit_code")
    assert exit_code == [({"fail_on": "error"}, 1.0)]


def test_a_rule_judged_per_subject_counts_its_subjects_by_status() -> None:
    facts = Facts({"gpu.count": 3})
    results = [
        Result("CD806", "NVLinks", "multi-gpu", status, "", subject=f"GPU {i}")
        for i, status in enumerate((Status.PASS, Status.WARN, Status.PASS))
    ] + [Result("CD101", "driver", "driver", Status.PASS, "")]
    text = render(Report(facts=facts, results=results), "prometheus")
    assert ({"rule": "CD806", "status": "warn"}, 1.0) in samples(text, "cuda_doctor_check")
    subjects = samples(text, "cuda_doctor_check_subjects")
    assert sorted(subjects, key=str) == sorted(
        [({"rule": "CD806", "status": "pass"}, 2.0), ({"rule": "CD806", "status": "warn"}, 1.0)], key=str
    )
    totals = dict((labels["status"], value) for labels, value in samples(text, "cuda_doctor_check_results"))
    assert totals == {"pass": 3, "info": 0, "warn": 1, "fail": 0, "unknown": 0, "skipped": 0, "error": 0}


def test_the_smoke_figures_per_gpu_in_base_units() -> None:
    text = render(h200_report(), "prometheus")
    gpu = {"gpu": "0", "uuid": SMOKE["smoke[0].uuid"]}
    flops = samples(text, "cuda_doctor_smoke_matmul_flop_per_second")
    assert ({**gpu, "dtype": "bf16"}, 612.5e12) in flops and ({**gpu, "dtype": "fp32"}, 49.25e12) in flops
    copies = samples(text, "cuda_doctor_smoke_copy_bytes_per_second")
    assert ({**gpu, "direction": "host_to_device", "memory": "pinned"}, 52.5e9) in copies
    assert ({**gpu, "direction": "device_to_host", "memory": "pinned"}, 53e9) in copies
    assert samples(text, "cuda_doctor_smoke_kernel_launch_seconds") == [(gpu, pytest.approx(4.5e-6))]
    steps = samples(text, "cuda_doctor_smoke_step_ok")
    assert ({**gpu, "step": "allocate"}, 1.0) in steps and ({**gpu, "step": "matmul_bf16"}, 0.0) in steps


def test_when_how_long_and_which_version() -> None:
    from cuda_doctor import __version__

    text = render(h200_report(seconds=1.25), "prometheus")
    assert samples(text, "cuda_doctor_check_timestamp_seconds") == [({}, 1796173323.0)]  # 2026-12-02T01:02:03Z
    assert samples(text, "cuda_doctor_check_duration_seconds") == [({}, 1.25)]
    assert ({"probe": "gpu"}, 0.03) in samples(text, "cuda_doctor_probe_duration_seconds")
    ((labels, value),) = samples(text, "cuda_doctor_build_info")
    assert labels["version"] == __version__ and value == 1
    assert samples(text, "cuda_doctor_driver_info") == [({"version": "580.159.04", "cuda_version": "13.0"}, 1.0)]
    assert samples(text, "cuda_doctor_gpus") == [({}, 1.0)]


def test_saved_facts_judged_again_have_no_duration() -> None:
    assert "cuda_doctor_check_duration_seconds" not in parsed(render(h200_report(seconds=None), "prometheus"))


@pytest.mark.parametrize("rule_id", ['CD"9', "CD\\9", "CD\n9", "CD\x1b[31m9", "CDé9"])
def test_label_values_are_escaped_and_read_back(rule_id: str) -> None:
    result = Result(rule_id, "a rule from a folder", "custom", Status.FAIL, "")
    text = render(Report(facts=Facts({}), results=[result]), "prometheus")
    ((labels, _),) = samples(text, "cuda_doctor_check")
    assert labels["status"] == "fail"
    # read back as written, every control character still an escape (never acted on by a reader)
    assert labels["rule"] == rule_id.replace("\n", "\\x0a").replace("\x1b", "\\x1b")


def test_no_host_name_path_or_variable_value_is_written() -> None:
    report = h200_report(**{"env.HF_TOKEN": "hf_secretsecret", "smoke.python": "/home/alice/.venv/bin/python"})
    text = render(report, "prometheus")
    assert "node-7" not in text and "hf_secret" not in text and "/home/alice" not in text


def test_check_writes_the_file_whole_with_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"facts": json.loads(H200_FACTS.read_text())}), encoding="utf-8")
    target = tmp_path / "textfile" / "cuda_doctor.prom"
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli, ["check", "--facts", str(facts), "--format", "prometheus", "-o", str(target)], catch_exceptions=False
    )
    assert result.exit_code == 0 and result.output == ""
    assert [path.name for path in target.parent.iterdir()] == ["cuda_doctor.prom"]  # no temporary file left
    assert ({"fail_on": "error"}, 0.0) in samples(target.read_text(encoding="utf-8"), "cuda_doctor_check_exit_code")


def test_fail_on_is_the_one_the_exit_status_used() -> None:
    report = h200_report()
    warned = [r._replace(status=Status.WARN) if r.rule_id == "CD102" else r for r in report.results]
    text = render(Report(facts=report.facts, results=warned), "prometheus", fail_on=Severity.WARNING.value)
    assert samples(text, "cuda_doctor_check_exit_code") == [({"fail_on": "warning"}, 1.0)]


def test_a_fast_check_of_eight_gpus_as_node_exporter_reads_it(tmp_path: Path) -> None:
    from tests.api.fake_machine import h200_env
    from tests.conftest import run_doctor

    target = tmp_path / "textfile" / "cuda_doctor.prom"
    env = h200_env(tmp_path, gpus=8, FAKE_PYNVML_NVLINKS_DOWN="5:4,5:9")
    done = run_doctor(["check", "--fast", "--format", "prometheus", "-o", str(target)], cwd=tmp_path, env=env)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    text = target.read_text(encoding="utf-8")
    assert ({"rule": "CD806", "status": "warn"}, 1.0) in samples(text, "cuda_doctor_check")
    assert samples(text, "cuda_doctor_gpus") == [({}, 8.0)]
    assert samples(text, "cuda_doctor_check_exit_code") == [({"fail_on": "error"}, 0.0)]
    ((_, took),) = samples(text, "cuda_doctor_check_duration_seconds")
    assert took > 0
    assert "cuda_doctor_smoke_matmul_flop_per_second" not in parsed(text)  # --fast: no smoke run

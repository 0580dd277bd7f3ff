from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from compare_reports import (
    base_report,
    failing_rule,
    other_driver,
    other_torch,
    scaled,
    slower_gpu,
    write,
)

from cuda_doctor.compare.diff import Diff, diff_reports
from cuda_doctor.core.reportfile import SavedReport, load_report
from cuda_doctor.core.results import Status


def _load(tmp_path: Path, name: str, data: dict[str, Any]) -> SavedReport:
    return load_report(write(tmp_path / f"{name}.json", data))


def _diff(tmp_path: Path, before: dict[str, Any], after: dict[str, Any], **kw: Any) -> Diff:
    return diff_reports(_load(tmp_path, "before", before), _load(tmp_path, "after", after), **kw)


def test_identical_reports_show_no_change(tmp_path: Path) -> None:
    d = _diff(tmp_path, base_report(), base_report())
    assert not d.changed and not d.worse
    assert d.facts == () and d.rules == () and d.checks == ()
    assert {f.verdict for f in d.figures} == {"same"}
    assert len(d.figures) == 6  # the six figures the recording has (no D2H)


def test_driver_and_torch_upgrade_lists_each_key_fact(tmp_path: Path) -> None:
    before = other_torch(other_driver(base_report()))
    d = _diff(tmp_path, before, base_report())
    changed = {f.name: (f.before, f.after) for f in d.facts}
    assert changed == {
        "driver.version": ("570.195.03", "580.159.04"),
        "driver.cuda_version": ("12.8", "13.0"),
        "torch.version": ("2.10.0+cu128", "2.11.0+cu130"),
        "torch.cuda_build": ("12.8", "13.0"),
        "torch.nccl_version": ("2.27.3", "2.28.9"),
    }
    assert not d.worse  # a new version alone is not a regression


def test_cpu_only_torch_is_a_known_none_not_unknown(tmp_path: Path) -> None:
    after = base_report()
    after["facts"]["values"]["torch.cuda_build"] = None
    del after["facts"]["values"]["torch.nccl_version"]
    d = _diff(tmp_path, base_report(), after)
    by_name = {f.name: f for f in d.facts}
    assert by_name["torch.cuda_build"].after is None and by_name["torch.cuda_build"].after_known
    assert not by_name["torch.nccl_version"].after_known


def test_gpu_model_and_count_changes(tmp_path: Path) -> None:
    after = base_report(gpus=2)
    after["facts"]["values"]["gpu[1].name"] = "NVIDIA H100 80GB HBM3"
    d = _diff(tmp_path, base_report(), after)
    by_name = {f.name: f for f in d.facts}
    assert (by_name["gpu.count"].before, by_name["gpu.count"].after) == (1, 2)
    assert by_name["gpu.models"].after == "1× NVIDIA H100 80GB HBM3, 1× NVIDIA H200"


def test_newly_failing_rule_makes_it_worse_and_comes_first(tmp_path: Path) -> None:
    before = copy.deepcopy(base_report())
    before["results"][1]["status"] = "fail"  # CD201 failed before, passes after: fixed
    after = failing_rule(base_report())
    after["results"][3]["status"] = "pass"  # CD120 info → pass: a change, not a finding
    d = _diff(tmp_path, before, after)
    assert [(r.rule, r.direction) for r in d.rules] == [
        ("CD310", "worse"),
        ("CD201", "better"),
        ("CD120", "changed"),
    ]
    assert d.rules[0].subject == "GPU 0" and d.rules[0].after is Status.FAIL
    assert d.worse


def test_rule_missing_on_one_side(tmp_path: Path) -> None:
    after = base_report()
    after["results"].append({**after["results"][0], "rule": "CD999", "status": "warn"})
    before = base_report()
    before["results"].append({**before["results"][0], "rule": "CD998", "status": "pass"})
    d = _diff(tmp_path, before, after)
    flips = {r.rule: r for r in d.rules}
    assert flips["CD999"].before is None and flips["CD999"].direction == "worse"
    assert flips["CD998"].after is None and flips["CD998"].direction == "changed"


def test_wobble_inside_the_noise_band_is_not_a_change(tmp_path: Path) -> None:
    d = _diff(tmp_path, base_report(), scaled(base_report(), 0.98))
    assert not d.worse and not d.slower and not d.faster
    d = _diff(tmp_path, base_report(), scaled(base_report(), 0.98), noise=0.01)
    assert d.worse and {f.metric for f in d.slower} == {
        "bf16_tflops",
        "fp16_tflops",
        "fp32_tflops",
        "h2d_pinned_gbps",
        "h2d_pageable_gbps",
    }


def test_slower_gpu_is_worse_with_ratio(tmp_path: Path) -> None:
    d = _diff(tmp_path, base_report(), slower_gpu(base_report(), 0.71, metrics=("h2d_pinned_gbps",)))
    (slow,) = d.slower
    assert slow.metric == "h2d_pinned_gbps" and slow.gpu == 0
    assert slow.ratio == pytest.approx(0.71, abs=0.005)
    assert d.worse


def test_faster_is_not_worse_and_launch_time_is_lower_is_better(tmp_path: Path) -> None:
    after = scaled(base_report(), 1.10)
    after["facts"]["values"]["smoke[0].launch_us"] = 9.5  # 1.24× the recorded 7.64 µs
    d = _diff(tmp_path, base_report(), after)
    assert {f.metric for f in d.faster} == {
        "bf16_tflops",
        "fp16_tflops",
        "fp32_tflops",
        "h2d_pinned_gbps",
        "h2d_pageable_gbps",
    }
    assert [f.metric for f in d.slower] == ["launch_us"]


def test_smoke_failure_and_broken_check(tmp_path: Path) -> None:
    after = base_report()
    v = after["facts"]["values"]
    v["smoke.status"] = "failed"
    v["smoke[0].conv_ok"] = False
    for key in [k for k in v if k.startswith("smoke[0].") and k.endswith(("_tflops", "_gbps"))]:
        del v[key]
    d = _diff(tmp_path, base_report(), after)
    assert [(c.name, c.worse) for c in d.checks] == [
        ("smoke.status", True),
        ("smoke[0].conv_ok", True),
    ]
    assert {f.verdict for f in d.figures if f.metric != "launch_us"} == {"missing"}
    assert d.worse


def test_noise_must_be_a_fraction(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        _diff(tmp_path, base_report(), base_report(), noise=5)


def test_brackets_in_messages_are_text_not_style_tags(tmp_path: Path) -> None:
    from cuda_doctor.report.compare.text import render_diff

    after = failing_rule(base_report())
    next(r for r in after["results"] if r["rule"] == "CD310")["message"] = "cannot open [/dev/nvidiactl] ([bold] stays)"
    text = render_diff(_diff(tmp_path, base_report(), after), width=200)
    assert "cannot open [/dev/nvidiactl] ([bold] stays)" in text


@pytest.mark.parametrize(
    ("name", "old", "new", "down"),
    [
        ("driver.version", "580.159.04", "535.104.05", True),
        ("driver.version", "535.104.05", "580.159.04", False),
        ("driver.cuda_version", "13.0", "12.8", True),
        ("torch.version", "2.11.0+cu130", "2.10.0+cu130", True),
        ("torch.version", "2.11.0+cu130", "2.11.0+cu128", False),  # the CUDA build says that one
        ("torch.cuda_build", "13.0", "12.8", True),
        ("torch.cuda_build", "13.0", None, True),  # a CPU-only build now
        ("torch.cuda_build", None, "13.0", False),
        ("tensorflow.version", "2.20.0", "2.19.1", True),
        ("driver.version", "580.159.04", "garbled", False),
        ("torch.version", "2.11.0", "not a version", False),
        ("torch.cudnn_version", 91900, 90100, False),  # not one of the four
    ],
)
def test_what_counts_as_a_downgrade(name: str, old: object, new: object, down: bool) -> None:
    from cuda_doctor.compare.diff import is_downgrade

    assert is_downgrade(name, old, new) is down

"""``check --format oneline``: one ASCII line a scheduler can show, and the verdict as exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report.check.oneline import LIMIT, clean, judge_oneline, render_oneline

REPO = Path(__file__).resolve().parents[2]


def result(
    rule: str,
    status: Status,
    message: str = "m",
    category: str = "gpu",
    subject: str | None = None,
    evidence: dict[str, object] | None = None,
) -> Result:
    return Result(rule, f"title of {rule}", category, status, message, subject=subject, evidence=evidence or {})


def report(*results: Result, **facts: object) -> Report:
    known = Facts()
    for name, value in facts.items():
        known.set(name.replace("__", "."), value)
    return Report(known, list(results), host="node1", created="2026-01-01T00:00:00+00:00")


def printable_ascii(line: str) -> bool:
    return all(0x20 <= ord(c) < 0x7F for c in line)


def test_ok_names_the_machine_and_what_passed() -> None:
    rep = report(
        result("CD101", Status.PASS, category="driver"),
        result("CD603", Status.WARN, "slowdown", category="health", subject="GPU 1"),
        result("CD701", Status.SKIPPED),
        driver__version="580.159.04",
        driver__cuda_version="13.0",
        **{"gpu[0]__name": "NVIDIA H200", "gpu[1]__name": "NVIDIA H200"},
    )
    verdict = judge_oneline(rep, Severity.ERROR)
    assert (verdict.word, verdict.exit_code) == ("OK", 0)
    assert verdict.line == "OK driver 580.159.04 (CUDA 13.0), 2x NVIDIA H200: 1 check passed, 1 warning (CD603)"


def test_fail_leads_with_the_worst_finding_and_names_the_others() -> None:
    rep = report(
        result("CD603", Status.WARN, "thermal slowdown", category="health", subject="GPU 0"),
        result("CD601", Status.FAIL, "uncorrectable ECC errors", category="health", subject="GPU 3"),
        result("CD401", Status.FAIL, "CUDA_VISIBLE_DEVICES=7 names no GPU", category="environment"),
        result("CD101", Status.PASS, category="driver"),
    )
    verdict = judge_oneline(rep, Severity.WARNING)
    assert verdict.exit_code == 1
    assert verdict.line == "FAIL CD401 CUDA_VISIBLE_DEVICES=7 names no GPU (+2 more: CD601, CD603)"
    # below --fail-on, a warning is not a finding
    assert judge_oneline(rep, Severity.ERROR).line.endswith("(+1 more: CD601)")


def test_a_finding_for_a_subject_says_which() -> None:
    rep = report(result("CD601", Status.FAIL, "2 uncorrectable ECC errors", category="health", subject="GPU 3"))
    assert render_oneline(rep) == "FAIL CD601 GPU 3: 2 uncorrectable ECC errors\n"


def test_control_characters_from_the_environment_are_escaped() -> None:
    hostile = "CUDA_VISIBLE_DEVICES=7\x1b[2J\x1b]0;owned\x07\r\nnext line\u2028\u202e\x9b\\"
    verdict = judge_oneline(report(result("CD401", Status.FAIL, hostile, category="environment")))
    assert printable_ascii(verdict.line)
    assert "\\x1b[2J" in verdict.line and "\\x0d\\x0a" in verdict.line and "\\u202e" in verdict.line
    assert verdict.line.endswith("\\x9b\\\\")  # a backslash is doubled, so escapes stay unambiguous


def test_typographic_marks_become_ascii() -> None:
    assert clean("8× H200 — fp16 → bf16 …") == "8x H200 - fp16 -> bf16 ..."


def test_a_long_message_is_cut_but_the_verdict_and_the_other_ids_stay() -> None:
    rep = report(
        result("CD101", Status.FAIL, "x" * 500, category="driver"),
        *[result(f"CD60{i}", Status.FAIL, category="health") for i in range(1, 9)],
    )
    line = judge_oneline(rep).line
    assert len(line) <= LIMIT
    assert line.startswith("FAIL CD101 xxx") and "..." in line
    assert line.endswith("(+8 more: CD601, CD602, CD603, CD604, CD605, CD606, ...)")


def test_an_unknown_driver_is_no_verdict_even_when_other_checks_pass() -> None:
    rep = report(
        result(
            "CD101",
            Status.UNKNOWN,
            "could not check: the gpu probe did not finish in time",
            category="driver",
            evidence={"driver.status": "unknown: the gpu probe did not finish in time"},
        ),
        result("CD401", Status.PASS, category="environment"),
        result("CD502", Status.PASS, category="container"),
        **{"probe.gpu.status": "timeout"},
    )
    rep.facts.mark_unknown("gpu", "the gpu probe did not finish in time")
    verdict = judge_oneline(rep)
    assert (verdict.word, verdict.exit_code) == ("UNKNOWN", 2)
    assert verdict.line == "UNKNOWN CD101 could not check: the gpu probe did not finish in time"


def test_nothing_judged_is_no_verdict_but_an_unknown_aside_is_not() -> None:
    only_unknown = report(result("CD601", Status.UNKNOWN, "could not check: ecc", category="health"))
    assert judge_oneline(only_unknown).word == "UNKNOWN"
    aside = report(result("CD101", Status.PASS, category="driver"), result("CD604", Status.UNKNOWN, category="health"))
    assert judge_oneline(aside).line == "OK 1 check passed, 1 could not check (CD604)"


def test_a_failure_outranks_unknown_facts() -> None:
    rep = report(
        result("CD101", Status.UNKNOWN, category="driver"), result("CD401", Status.FAIL, "bad", category="environment")
    )
    assert judge_oneline(rep).line == "FAIL CD401 bad"


# -- as a real process: the line on stdout, the verdict as the exit status -----------------------


def doctor_check(fake: object, *args: str, mode: str = "ok", **env: str) -> subprocess.CompletedProcess[str]:
    ctx = fake.ctx(mode)  # type: ignore[attr-defined]
    full_env = {
        **ctx.env,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", "--fast", "--format", "oneline", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        check=False,
    )


# the GPU's own rules, so that nothing about this machine (its /dev/shm, its environment) counts
SELECT = "--select=CD101,CD401,CD6"


def test_check_oneline_ok(fake_nvidia_smi: object) -> None:
    proc = doctor_check(fake_nvidia_smi, SELECT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK driver 580.159.04 (CUDA 13.0), 1x NVIDIA H200: ")
    assert proc.stdout.count("\n") == 1 and "\x1b" not in proc.stdout


def test_check_oneline_fail_keeps_exit_1(fake_nvidia_smi: object) -> None:
    proc = doctor_check(fake_nvidia_smi, SELECT, CUDA_VISIBLE_DEVICES="7\x1b[31m")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("FAIL CD401 CUDA_VISIBLE_DEVICES=7\\x1b[31m")
    assert printable_ascii(proc.stdout.rstrip("\n")) and len(proc.stdout) <= LIMIT + 1


def test_check_oneline_driver_that_does_not_answer(fake_nvidia_smi: object) -> None:
    proc = doctor_check(fake_nvidia_smi, SELECT, mode="not_loaded")
    assert proc.returncode == 1 and proc.stdout.startswith("FAIL CD101 the NVIDIA kernel driver is not loaded")


def test_check_oneline_without_a_verdict_exits_2(fake_nvidia_smi: object, tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    assert doctor_check(fake_nvidia_smi, "--save", str(saved)).returncode == 0
    data = json.loads(saved.read_text())
    for name in [n for n in data["facts"]["values"] if n.startswith(("driver.", "gpu[", "nvidia_smi."))]:
        del data["facts"]["values"][name]
    data["facts"]["values"]["probe.gpu.status"] = "timeout"
    data["facts"]["unknown"]["gpu"] = "the gpu probe did not finish in time"
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps(data))

    def judge(fmt: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cuda_doctor", "check", "--facts", str(unknown), "--format", fmt, SELECT],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=120,
            check=False,
        )

    proc = judge("oneline")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.startswith("UNKNOWN CD101 could not check") and "did not finish in time" in proc.stdout
    # one rule for every format: no verdict is exit 2, and each says so
    for fmt in ("text", "markdown", "json"):
        other = judge(fmt)
        assert other.returncode == 2, other.stdout
        assert "no verdict: the NVIDIA driver could not be checked" in other.stdout or fmt == "json"
    assert json.loads(judge("json").stdout)["summary"]["exit_code"] == 2

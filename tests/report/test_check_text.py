"""The terminal checklist's lines: checks that could not run for one reason are said once."""

from __future__ import annotations

from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report.check.text import render


def result(rule: str, status: Status, message: str, subject: str | None = None) -> Result:
    return Result(rule, f"title of {rule}", "gpu", status, message, subject=subject)


def report(*results: Result) -> Report:
    return Report(Facts(), list(results), host="node1", created="2026-01-01T00:00:00+00:00")


NO_NVML = "could not check: libnvidia-ml.so.1 not found"


def test_checks_that_could_not_run_for_one_reason_are_one_line_with_their_count() -> None:
    text = render(
        report(
            result("CD301", Status.UNKNOWN, NO_NVML),
            result("CD302", Status.FAIL, "a real finding"),
            result("CD303", Status.UNKNOWN, NO_NVML),
            result("CD304", Status.UNKNOWN, "could not check: another reason"),
            result("CD305", Status.UNKNOWN, NO_NVML),
        ),
        fail_on=Severity.ERROR,
    )
    lines = text.splitlines()
    assert [line for line in lines if NO_NVML in line] == [f"    ? {NO_NVML}  (3 checks)"]
    assert "    ? could not check: another reason" in lines
    assert lines.index("    ✗ a real finding") < lines.index(f"    ? {NO_NVML}  (3 checks)")


def test_each_gpu_keeps_its_own_line_and_verbose_lists_every_check() -> None:
    results = [result(f"CD30{n}", Status.UNKNOWN, NO_NVML, subject=f"GPU {n % 2}") for n in range(4)]
    text = render(report(*results), fail_on=Severity.ERROR)
    assert text.count("(2 checks)") == 2 and "[GPU 0]" in text and "[GPU 1]" in text
    verbose = render(report(*results), verbose=True, fail_on=Severity.ERROR)
    assert verbose.count(NO_NVML) == 4 and "checks)" not in verbose
    assert all(f"CD30{n}: title of CD30{n}" in verbose for n in range(4))

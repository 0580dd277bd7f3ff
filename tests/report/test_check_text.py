"""The terminal checklist's lines: checks that could not run for one reason are said once."""

from __future__ import annotations

from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.gpu import memory_health
from cuda_doctor.report.check.text import free_memory, render


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


# -- each GPU's free memory ---------------------------------------------------------------------
def _memory(rows: list[tuple[int, int]]) -> Facts:
    facts = Facts()
    facts.set("gpu.count", len(rows))
    for i, (total, used) in enumerate(rows):
        facts.set(f"gpu[{i}].name", "NVIDIA H200")
        facts.set(f"gpu[{i}].memory_total_mib", total)
        facts.set(f"gpu[{i}].memory_used_mib", used)
    memory_health.derive(facts)
    return facts


def test_the_checklist_shows_each_gpus_free_memory() -> None:
    lines = render(Report(_memory([(143771, 139782)]), [])).splitlines()
    assert lines[:2] == ["1× NVIDIA H200", "free GPU memory: 3,989 of 143,771 MiB"]
    two = render(Report(_memory([(143771, 615), (143771, 139782)]), [])).splitlines()
    assert two[1] == "free GPU memory (MiB of 143,771): GPU 0 143,156, GPU 1 3,989"


def test_many_gpus_name_the_one_with_least_free() -> None:
    facts = _memory([(143771, 615)] * 9 + [(143771, 139782)])
    assert free_memory(facts) == "free GPU memory: least on GPU 9, 3,989 of 143,771 MiB (10 GPUs read)"
    assert free_memory(Facts()) == ""

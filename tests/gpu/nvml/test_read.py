"""One read of NVML on its own thread: deadlines, the hand-over before shutdown, the read
started at process entry."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import read as nvml_read
from cuda_doctor.gpu.nvml.read import collect_nvml
from tests.gpu.nvml.reading import read_and_close

MakeNvml = Callable[..., Any]


def test_loader_oserror_means_library_not_found(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    error = OSError("libnvidia-ml.so.1: cannot open shared object file")
    facts = collect_nvml(ctx, make_nvml(init_exception=error).module())
    assert facts.get("driver.status") == "library_not_found"
    assert "cannot open shared object file" in facts.get("driver.error")


def test_missing_binding_means_library_not_found(ctx: ProbeContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    facts = collect_nvml(ctx)
    assert facts.get("driver.status") == "library_not_found"
    assert "nvidia-ml-py (module pynvml) cannot be imported" in facts.get("driver.error")


def test_a_hung_init_is_abandoned(make_nvml: MakeNvml, tmp_path: Path) -> None:
    fake = make_nvml(hang=threading.Event())
    facts = collect_nvml(ProbeContext(root=tmp_path, timeout=0.5), fake.module())
    assert facts.get("driver.status") == "not_answering"
    assert facts.get("driver.error") == "NVML did not answer in 0.5 s"
    assert facts.unknown["driver.version"] == "NVML did not answer in 0.5 s"
    assert fake.shutdowns == 0


def test_a_hang_after_init_still_shuts_down(make_nvml: MakeNvml, tmp_path: Path) -> None:
    release = threading.Event()
    fake = make_nvml(hang=release, hang_in="nvmlDeviceGetCount")
    facts = collect_nvml(ProbeContext(root=tmp_path, timeout=0.5), fake.module())
    assert facts.get("driver.error") == "NVML did not answer in 0.5 s"
    assert "gpu.count" not in facts
    release.set()  # the abandoned worker finishes and must close NVML
    deadline = time.monotonic() + 10
    while fake.shutdowns == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.shutdowns == 1


def test_facts_are_handed_over_before_nvml_is_shut_down(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    release = threading.Event()
    fake = make_nvml(hang=release, hang_in="nvmlShutdown")
    facts = collect_nvml(ctx, fake.module())  # returns although nvmlShutdown has not returned
    assert facts.get("driver.status") == "ok"
    assert facts.get("gpu[0].name") == "NVIDIA H200"
    assert fake.shutdowns == 0
    release.set()
    deadline = time.monotonic() + 10
    while fake.shutdowns == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.shutdowns == 1


def test_a_failed_shutdown_is_kept_for_debugging(
    make_nvml: MakeNvml, ctx: ProbeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: list[str] = []
    monkeypatch.setattr(nvml_read, "shutdown_errors", errors)
    facts = read_and_close(ctx, make_nvml(errors={"nvmlShutdown": pynvml.NVML_ERROR_UNKNOWN}).module())
    assert facts.get("driver.status") == "ok"  # the readings stand
    assert errors == ["Unknown Error"]


def test_wait_closed_waits_for_the_background_shutdown(make_nvml: MakeNvml, ctx: ProbeContext) -> None:
    release = threading.Event()
    fake = make_nvml(hang=release, hang_in="nvmlShutdown")
    collect_nvml(ctx, fake.module())
    assert nvml_read.wait_closed(0.2) is False  # still inside nvmlShutdown
    release.set()
    assert nvml_read.wait_closed(10) is True
    assert fake.shutdowns == 1

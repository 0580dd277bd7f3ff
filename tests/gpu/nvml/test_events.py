"""NVML's critical Xid events, listened to while cuda-doctor loads the GPUs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pynvml

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml.events import XidEvents
from cuda_doctor.smoke import probe as smoke_probe
from tests.conftest import wait_until


def test_xids_raised_while_listening_are_named_with_their_gpu(make_nvml: Callable[..., Any]) -> None:
    fake = make_nvml(device_count=2, xid_events=[(1, 79), (0, 13)], xid_unsupported=frozenset())
    listening = XidEvents(fake.module()).start()
    assert wait_until(lambda: not fake.xid_events)  # both delivered while it listens
    events, why = listening.stop()
    assert why is None
    assert [(e["gpu"], e["xid"]) for e in events] == [(1, 79), (0, 13)]
    assert fake.shutdowns == 1 and "nvmlEventSetFree" in fake.calls


def test_a_gpu_that_cannot_listen_leaves_the_others_listening(make_nvml: Callable[..., Any]) -> None:
    fake = make_nvml(device_count=2, xid_events=[(1, 119)], xid_unsupported=frozenset({0}))
    listening = XidEvents(fake.module()).start()
    assert wait_until(lambda: not fake.xid_events)
    events, why = listening.stop()
    assert why is None and [(e["gpu"], e["xid"]) for e in events] == [(1, 119)]
    fake = make_nvml(device_count=1, xid_unsupported=frozenset({0}))
    events, why = XidEvents(fake.module()).start().stop()
    assert events == [] and why == "no GPU here delivers Xid events through NVML"


def test_no_driver_is_a_reason_not_a_crash(make_nvml: Callable[..., Any]) -> None:
    fake = make_nvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    events, why = XidEvents(fake.module()).start().stop()
    assert events == [] and why is not None and why.startswith("NVML is not available")


def test_a_wedged_driver_is_abandoned(make_nvml: Callable[..., Any]) -> None:
    fake = make_nvml(hang=threading.Event(), hang_in="nvmlEventSetWait_v2")
    start = time.monotonic()
    events, why = XidEvents(fake.module()).start().stop(timeout=0.5)
    assert events == [] and why == "NVML's event wait did not end within 0.5 s"
    assert time.monotonic() - start < 30  # the test's own bound: it returned, it did not hang


def test_the_smoke_run_reports_the_xids_it_saw(make_nvml: Callable[..., Any], monkeypatch: Any) -> None:
    fake = make_nvml(xid_events=[(0, 79)])

    def run_smoke(ctx: ProbeContext, progress: object) -> Any:
        time.sleep(0.3)  # the GPU faults while the smoke children run
        raise RuntimeError("the smoke child lost its GPU")

    monkeypatch.setattr(smoke_probe, "run_smoke", run_smoke)
    monkeypatch.setattr(smoke_probe.SmokeProbe, "nvml", fake.module())
    facts = smoke_probe.SmokeProbe().collect(ProbeContext(env={}))
    assert facts.get("smoke.status") == "failed"
    assert [(e["gpu"], e["xid"]) for e in facts.get("smoke.xid_events")] == [(0, 79)]
    derive_all(facts)
    assert facts.get("derived.smoke.xid_events")[0].startswith("GPU 0 raised Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN")


def test_without_nvml_the_smoke_run_says_why_it_could_not_listen() -> None:
    facts = Facts()
    facts.mark_unknown("smoke.xid_events", "NVML is disabled (CUDA_DOCTOR_DISABLE_NVML)")
    derive_all(facts)
    assert facts.reason("derived.smoke.xid_events") == "NVML is disabled (CUDA_DOCTOR_DISABLE_NVML)"

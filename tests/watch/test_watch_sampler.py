"""The sampler against the fake NVML (tests/fakes/fake_pynvml.py), watching real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pynvml

from cuda_doctor.watch.sampler import Sampler, child_tree, visible_indices

MakeNvml = Callable[..., Any]

#: A GPU under load: 350 W at 45 °C, held at its software power cap, copying 500 MB/s in.
BUSY = {
    "utilization": (50, 25),
    "power_mw": 350_000,
    "temperature": 45,
    "clock_reasons": 0x4,
    "pcie_kbps": (500_000, 10_000),
    "process_sm_util": 40,
}


def busy_gpu(make_nvml: MakeNvml, *, util: int = 50, **options: Any) -> Any:
    return make_nvml(readings={**BUSY, "utilization": (util, util // 2)}, **options)


def _process(pid: int) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, usedGpuMemory=1024 << 20)


def _sleeper(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def _sample(fake: Any, seconds: float, env: dict[str, str] | None = None, **options: Any) -> Any:
    proc = _sleeper(seconds)
    sampler = Sampler(proc.pid, interval=0.05, nvml=fake.module(), env=env or {}, **options)
    sampler.start()
    proc.wait()
    return sampler.stop(join_timeout=5)


def test_samples_while_the_child_runs_and_stops_with_it(make_nvml: MakeNvml) -> None:
    fake = busy_gpu(make_nvml, util=70)
    proc = _sleeper(0.6)
    sampler = Sampler(proc.pid, interval=0.05, nvml=fake.module(), env={})
    sampler.start()
    assert sampler.thread.daemon  # can never keep the process alive
    proc.wait()
    series = sampler.stop(join_timeout=5)
    assert not sampler.thread.is_alive()
    assert len(series.samples) >= 3
    assert series.nvml_error is None
    assert fake.shutdowns == 1
    calls = len(fake.calls)
    time.sleep(0.3)
    assert len(fake.calls) == calls  # nothing samples after stop
    first = series.samples[0]
    assert first.sm_util == 70 and first.power_w == 350.0 and first.temperature_c == 45
    assert first.clock_event_reasons == 0x4
    assert first.pcie_rx_mbps == round(500_000 * 1024 / 1e6, 2)
    assert series.gpus[0].memory_total_mib == 143771
    assert series.sampler_cpu_s is not None and series.sampler_cpu_s >= 0


def test_attributes_gpu_use_to_the_command_per_process(make_nvml: MakeNvml) -> None:
    proc = _sleeper(0.5)
    fake = busy_gpu(make_nvml, device_count=2, processes={0: [_process(999_999_999)], 1: [_process(proc.pid)]})
    sampler = Sampler(proc.pid, interval=0.05, nvml=fake.module(), env={})
    sampler.start()
    proc.wait()
    series = sampler.stop(join_timeout=5)
    assert series.per_process
    on0 = {s.child_on_gpu for s in series.for_gpu(0)}
    on1 = {s.child_on_gpu for s in series.for_gpu(1)}
    assert on0 == {False} and on1 == {True}
    assert all(s.child_sm_util == 40 and s.child_mem_used_mib == 1024 for s in series.for_gpu(1))


def test_child_tree_includes_descendants() -> None:
    proc = subprocess.Popen(["sh", "-c", "sleep 3 & sleep 3 & wait"])
    try:
        deadline = time.monotonic() + 5
        tree = child_tree(proc.pid)
        while len(tree) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            tree = child_tree(proc.pid)
        assert proc.pid in tree and len(tree) == 3
    finally:
        for pid in child_tree(proc.pid) - {proc.pid}:
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


def test_a_hung_nvml_call_ends_sampling_not_the_run(make_nvml: MakeNvml) -> None:
    # the second utilisation read never returns (the fixture releases it at teardown)
    fake = busy_gpu(make_nvml, hang=threading.Event(), hang_in="nvmlDeviceGetUtilizationRates", hang_from=2)
    proc = _sleeper(1.0)
    sampler = Sampler(proc.pid, interval=0.05, nvml=fake.module(), env={}, call_timeout=0.2)
    sampler.start()
    proc.wait()
    series = sampler.stop(join_timeout=5)
    assert not sampler.thread.is_alive()
    assert series.nvml_error is not None and "did not answer in 0.2 s" in series.nvml_error
    assert len(series.samples) == 1


def test_slow_answers_within_the_limit_are_still_samples(make_nvml: MakeNvml) -> None:
    fake = busy_gpu(make_nvml, slow={"nvmlDeviceGetPowerUsage": 0.05})
    series = _sample(fake, 0.5, call_timeout=2.0)
    assert series.nvml_error is None
    assert series.samples and all(s.power_w == 350.0 for s in series.samples)


def test_nvml_unavailable_is_reported_and_nothing_is_sampled(make_nvml: MakeNvml) -> None:
    series = _sample(busy_gpu(make_nvml, init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), 0.2)
    assert series.samples == ()
    assert series.nvml_error == "NVML is not available: NVML Shared Library Not Found"


def test_unsupported_fields_are_asked_once_and_left_empty(make_nvml: MakeNvml) -> None:
    fake = busy_gpu(make_nvml, errors={"nvmlDeviceGetPcieThroughput": pynvml.NVML_ERROR_NOT_SUPPORTED})
    series = _sample(fake, 0.4)
    assert len(series.samples) >= 3
    assert all(s.pcie_rx_mbps is None and s.pcie_tx_mbps is None for s in series.samples)
    assert fake.calls.count("nvmlDeviceGetPcieThroughput") == 2  # rx and tx once each, then no more
    assert any("pcie_rx unavailable" in n for n in series.notes)


def test_samples_only_the_gpus_cuda_visible_devices_exposes(make_nvml: MakeNvml) -> None:
    series = _sample(busy_gpu(make_nvml, device_count=4), 0.3, env={"CUDA_VISIBLE_DEVICES": "2,GPU-00000003"})
    assert [g.index for g in series.gpus] == [2, 3]
    assert {s.gpu for s in series.samples} == {2, 3}


def test_a_gpu_listed_twice_is_sampled_nowhere_as_check_says(make_nvml: MakeNvml) -> None:
    series = _sample(busy_gpu(make_nvml, device_count=2), 0.3, env={"CUDA_VISIBLE_DEVICES": "0,0"})
    assert series.gpus == () and series.samples == ()
    assert any("'0' is listed twice" in n and "error 101" in n for n in series.notes)


def test_a_mig_instance_is_sampled_on_its_gpu(make_nvml: MakeNvml) -> None:
    fake = busy_gpu(make_nvml, device_count=2, mig_devices={1: ["MIG-5c0a7b2e-6d1f-5e4a-9b3c-2f1e0d9c8b7a"]})
    series = _sample(fake, 0.3, env={"CUDA_VISIBLE_DEVICES": "MIG-5c0a7b2e"})
    assert [g.index for g in series.gpus] == [1]
    assert {s.gpu for s in series.samples} == {1}


def test_visible_indices_follow_cuda_rules() -> None:
    uuids: list[str | None] = ["GPU-aaa1", "GPU-bbb2", "GPU-ccc3"]
    assert visible_indices(None, uuids) == ([0, 1, 2], None)
    assert visible_indices("2,0", uuids) == ([2, 0], None)
    assert visible_indices("1,-1,0", uuids)[0] == [1]  # ends at the first invalid entry
    assert visible_indices("GPU-bbb", uuids)[0] == [1]
    assert visible_indices("GPU-", uuids)[0] == []  # ambiguous prefix names nothing
    none, note = visible_indices("", uuids)
    assert none == [] and note is not None and "empty" in note
    assert visible_indices("7", uuids)[1] is not None


def test_visible_indices_read_duplicates_and_mig_as_check_does() -> None:
    uuids: list[str | None] = ["GPU-aaa1", "GPU-bbb2", "GPU-ccc3"]
    twice, note = visible_indices("0,0", uuids)
    assert twice == [] and note is not None and "invalid device ordinal" in note
    mig = {"MIG-1111-a": 2, "MIG-2222-b": 2, "MIG-3333-c": 0}
    assert visible_indices("MIG-2222", uuids, mig) == ([2], None)
    assert visible_indices("MIG-1111,MIG-2222", uuids, mig) == ([2], None)  # one GPU, sampled once
    assert visible_indices("MIG-3333,MIG-9999", uuids, mig)[0] == [0]  # ends at the unknown instance
    assert visible_indices("MIG-9999", uuids, mig)[0] == []  # no such instance: no GPU
    every, note = visible_indices("MIG-2222", uuids)  # NVML could not list the instances
    assert every == [0, 1, 2] and note is not None and "MIG" in note

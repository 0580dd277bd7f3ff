"""The sampler against a stand-in NVML, watching real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from watch_fake_nvml import FakeNvml, NVMLError

from cuda_doctor.watch.sampler import Sampler, child_tree, visible_indices


def _sleeper(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def test_samples_while_the_child_runs_and_stops_with_it() -> None:
    nvml = FakeNvml(util=70)
    proc = _sleeper(0.6)
    sampler = Sampler(proc.pid, interval=0.05, nvml=nvml, env={})
    sampler.start()
    assert sampler.thread.daemon  # can never keep the process alive
    proc.wait()
    series = sampler.stop(join_timeout=5)
    assert not sampler.thread.is_alive()
    assert len(series.samples) >= 3
    assert series.nvml_error is None
    assert nvml.shutdown
    calls = nvml.total_calls()
    time.sleep(0.3)
    assert nvml.total_calls() == calls  # nothing samples after stop
    first = series.samples[0]
    assert first.sm_util == 70 and first.power_w == 350.0 and first.temperature_c == 45
    assert first.clock_event_reasons == 0x4
    assert first.pcie_rx_mbps == round(500_000 * 1024 / 1e6, 2)
    assert series.gpus[0].memory_total_mib == 143771
    assert series.sampler_cpu_s is not None and series.sampler_cpu_s >= 0


def test_attributes_gpu_use_to_the_command_per_process() -> None:
    proc = _sleeper(0.5)
    nvml = FakeNvml(count=2, pids=lambda gpu: [proc.pid] if gpu == 1 else [999_999_999])
    sampler = Sampler(proc.pid, interval=0.05, nvml=nvml, env={})
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


def test_a_hung_nvml_call_ends_sampling_not_the_run() -> None:
    nvml = FakeNvml(hang_on_call=2)
    proc = _sleeper(1.0)
    sampler = Sampler(proc.pid, interval=0.05, nvml=nvml, env={}, call_timeout=0.2)
    sampler.start()
    try:
        proc.wait()
        series = sampler.stop(join_timeout=5)
        assert not sampler.thread.is_alive()
        assert series.nvml_error is not None and "did not answer in 0.2 s" in series.nvml_error
        assert len(series.samples) == 1
    finally:
        nvml.release.set()


def test_nvml_unavailable_is_reported_and_nothing_is_sampled() -> None:
    nvml = FakeNvml(init_error=NVMLError(12, "NVML Shared Library Not Found"))
    proc = _sleeper(0.2)
    sampler = Sampler(proc.pid, interval=0.05, nvml=nvml, env={})
    sampler.start()
    proc.wait()
    series = sampler.stop(join_timeout=5)
    assert series.samples == ()
    assert series.nvml_error == "NVML is not available: NVML Shared Library Not Found"


def test_unsupported_fields_are_asked_once_and_left_empty() -> None:
    nvml = FakeNvml(pcie_error=NVMLError(3, "Not Supported"))
    proc = _sleeper(0.4)
    sampler = Sampler(proc.pid, interval=0.05, nvml=nvml, env={})
    sampler.start()
    proc.wait()
    series = sampler.stop(join_timeout=5)
    assert len(series.samples) >= 3
    assert all(s.pcie_rx_mbps is None and s.pcie_tx_mbps is None for s in series.samples)
    assert nvml.calls["pcie"] == 2  # rx and tx once each, then no more
    assert any("pcie_rx unavailable" in n for n in series.notes)


def test_samples_only_the_gpus_cuda_visible_devices_exposes() -> None:
    nvml = FakeNvml(count=4)
    proc = _sleeper(0.3)
    env = {"CUDA_VISIBLE_DEVICES": "2,GPU-00000003"}
    sampler = Sampler(proc.pid, interval=0.05, nvml=nvml, env=env)
    sampler.start()
    proc.wait()
    series = sampler.stop(join_timeout=5)
    assert [g.index for g in series.gpus] == [2, 3]
    assert {s.gpu for s in series.samples} == {2, 3}


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

"""Free GPU memory and the floor under which a GPU is nearly full (CD604)."""

from __future__ import annotations

from cuda_doctor.core.facts import Facts
from cuda_doctor.gpu import memory_health


def _gpu(total: object, used: object, **more: object) -> Facts:
    facts = Facts()
    facts.set("gpu.count", 1)
    facts.set("gpu[0].memory_total_mib", total)
    facts.set("gpu[0].memory_used_mib", used)
    for name, value in more.items():
        facts.set(name, value)
    return facts


def test_free_is_total_less_used() -> None:
    facts = _gpu(143771, 139782)  # the H200 another process held
    memory_health.derive(facts)
    assert facts.get("derived.gpu[0].memory_free_mib") == 3989
    assert facts.get("derived.gpu[0].memory_free_percent") == 2.8
    assert facts.get("derived.gpu_min_free_percent") == memory_health.default_floor() == 5.0


def test_a_configured_floor_wins() -> None:
    facts = _gpu(143771, 615, **{"config.gpu_min_free_percent": 20.0})
    memory_health.derive(facts)
    assert facts.get("derived.gpu_min_free_percent") == 20.0


def test_memory_not_read_leaves_free_unknown_with_the_reason() -> None:
    facts = _gpu(143771, 615)
    del facts.values["gpu[0].memory_used_mib"]
    facts.mark_unknown("gpu[0].memory_used_mib", "NVML: Not Supported")
    memory_health.derive(facts)
    assert facts.reason("derived.gpu[0].memory_free_mib") == "NVML: Not Supported"
    assert facts.reason("derived.gpu[0].memory_free_percent") == "NVML: Not Supported"


def test_no_size_is_not_a_full_gpu() -> None:
    facts = _gpu(None, None)
    memory_health.derive(facts)
    assert not facts.has("derived.gpu[0].memory_free_percent")
    assert facts.reason("derived.gpu[0].memory_free_percent") == "the driver reports no memory size for this GPU"

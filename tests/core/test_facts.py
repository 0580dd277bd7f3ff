"""The fact model: known values, unknown reasons, indexed families."""

from __future__ import annotations

import pytest

from cuda_doctor.core.facts import Facts, about, indexed


def test_indices_of_a_family() -> None:
    facts = Facts()
    for i in (1, 0, 10):
        facts.set(indexed("gpu", i, "name"), "NVIDIA H200")
    facts.set("gpu[2]", "not a field of GPU 2")  # no ".field": not an index of the family
    facts.set("gpu[x].name", "bad index")
    facts.set("derived.gpu[3].arch", "9.0")  # "derived.gpu" is not a family name
    facts.set("image[0].tag", "12.4.1-base")
    facts.set("gpu.count", 3)
    assert facts.indices("gpu") == [0, 1, 10]
    assert facts.indices("image") == [0]
    assert facts.indices("derived.gpu") == []
    assert facts.indices("smoke") == []


def test_indices_follow_new_names_and_replaced_values() -> None:
    facts = Facts()
    facts.set("gpu[0].name", "A")
    assert facts.indices("gpu") == [0]
    facts.set("gpu[1].name", "B")  # a new name
    assert facts.indices("gpu") == [0, 1]
    facts.set("gpu[1].name", "C")  # a new value only
    assert facts.indices("gpu") == [0, 1]
    facts.values = {"gpu[5].name": "D"}  # as re-judging a saved report does
    assert facts.indices("gpu") == [5]
    returned = facts.indices("gpu")
    returned.append(99)  # the caller's list, not the cache
    assert facts.indices("gpu") == [5]


def test_indices_kept_current_by_set_and_redone_after_a_direct_write() -> None:
    facts = Facts()
    facts.set("gpu[1].name", "A")
    assert facts.indices("gpu") == [1]
    facts.set("gpu[0].name", "B")  # kept in order
    facts.set("gpu[0].uuid", "GPU-0")  # an index already known
    facts.set("image[3].tag", "12.4.1-base")  # a family new since the last ask
    facts.set("gpu[7]", "no field: not an index")
    assert (facts.indices("gpu"), facts.indices("image")) == ([0, 1], [3])
    facts.values["gpu[4].name"] = "C"  # written past set()
    assert facts.indices("gpu") == [0, 1, 4]
    facts.set("gpu[2].name", "D")
    assert facts.indices("gpu") == [0, 1, 2, 4]


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("driver.status", "the NVIDIA driver"),
        ("gpu[0].name", "the GPUs"),
        ("derived.gpu[0].sm", "the GPUs"),
        ("derived.driver_cuda_support", "the NVIDIA driver"),
        ("derived.shm_mib", "the shared memory"),
        ("gpu", "the GPUs"),
        ("weird[", "what this check needs"),
    ],
)
def test_what_a_fact_is_about(name: str, words: str) -> None:
    assert about(name) == words


def test_a_known_value_wins_over_an_unknown_reason() -> None:
    facts = Facts()
    facts.mark_unknown("driver.version", "NVML not found")
    assert facts.reason("driver.version") == "NVML not found"
    facts.set("driver.version", "580.159.04")
    assert "driver.version" not in facts.unknown
    facts.mark_unknown("driver.version", "late failure")
    assert facts.get("driver.version") == "580.159.04" and "driver.version" not in facts.unknown


def test_reason_falls_back_to_parents() -> None:
    facts = Facts()
    facts.mark_unknown("gpu", "no driver")
    facts.mark_unknown("gpu[1]", "GPU is lost")
    assert facts.reason("gpu[1].name") == "GPU is lost"
    assert facts.reason("gpu[0].name") == "no driver"
    assert facts.reason("torch.version") is None


def test_equality_ignores_the_index_cache() -> None:
    one, two = Facts({"gpu[0].name": "A"}), Facts({"gpu[0].name": "A"})
    one.indices("gpu")
    assert one == two
    assert one.copy() == one


@pytest.mark.parametrize("data", [{"values": [], "unknown": {}}, {"values": {}, "unknown": "x"}])
def test_from_dict_refuses_malformed_facts(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="'values' and 'unknown'"):
        Facts.from_dict(data)

"""Derived container facts: requirements judged for the host, nvidia/cuda tag status, torch variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.container.derive import derive, load_tags, tag_status
from cuda_doctor.facts import Facts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "container"
H200_REQUIRE = (FIXTURES / "h200-nvidia-require-cuda.txt").read_text().strip()


def host(driver: str = "580.159.04", cuda: str = "13.0", brand: str | None = "NVIDIA") -> Facts:
    facts = Facts()
    facts.set("driver.version", driver)
    facts.set("driver.cuda_version", cuda)
    facts.set("gpu.count", 1)
    facts.set("gpu[0].compute_capability", "9.0")
    if brand is not None:
        facts.set("gpu[0].brand", brand)
    return facts


def with_image(facts: Facts, ref: str, **values: Any) -> Facts:
    facts.set("image[0].ref", ref)
    facts.set("image[0].found", True)
    facts.set("image[0].nvidia_disable_require", False)
    for key, value in values.items():
        facts.set(f"image[0].{key}", value)
    return facts


def test_the_in_container_requirement_on_the_recorded_h200() -> None:
    facts = host()
    facts.set("container.cuda_version", "13.0.2")
    facts.set("container.nvidia_require_cuda", H200_REQUIRE)
    facts.set("container.nvidia_disable_require", False)
    derive(facts)
    assert facts.get("derived.container.require_satisfied") is True
    assert facts.get("derived.container.required_cuda") == "13.0"
    assert facts.get("derived.container.has_requirement") is True


def test_the_in_container_requirement_on_an_old_driver() -> None:
    facts = host("470.82.01", "11.4")
    facts.set("container.cuda_version", "13.0.2")
    facts.set("container.nvidia_require_cuda", H200_REQUIRE)
    derive(facts)
    assert facts.get("derived.container.require_satisfied") is False
    assert "unsatisfied condition: cuda>=13.0" in facts.get("derived.container.require_detail")
    assert facts.get("derived.container.driver_needed") == "580.65.06"  # CUDA 13.0 GA, Linux


def test_no_container_facts_leave_the_outputs_unknown_with_a_reason() -> None:
    facts = host()
    facts.mark_unknown("container.cuda_version", "the environment probe did not run")
    derive(facts)
    assert "derived.container.require_satisfied" not in facts
    assert facts.reason("derived.container.require_satisfied") == "the environment probe did not run"


def test_an_unknown_driver_carries_its_reason() -> None:
    facts = Facts()
    facts.mark_unknown("driver.version", "libnvidia-ml.so.1 not found")
    facts.mark_unknown("driver.cuda_version", "libnvidia-ml.so.1 not found")
    with_image(facts, "nvidia/cuda:12.2.2-base-ubuntu22.04", cuda_version="12.2.2", nvidia_require_cuda="cuda>=12.2")
    derive(facts)
    assert "libnvidia-ml.so.1 not found" in (facts.reason("derived.image[0].require_satisfied") or "")


def test_an_image_judged_against_an_old_driver_suggests_a_tag_it_can_run() -> None:
    facts = with_image(
        host("535.104.05", "12.2", brand="Tesla"),
        "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
        cuda_version="12.4.1",
        nvidia_require_cuda="cuda>=12.4 brand=tesla,driver>=470,driver<471",
    )
    derive(facts)
    assert facts.get("derived.image[0].require_satisfied") is False
    assert facts.get("derived.image[0].required_cuda") == "12.4"
    assert facts.get("derived.image[0].driver_needed") == "550.54.14"
    assert facts.get("derived.image[0].suggested_image") == "nvidia/cuda:12.2.2-cudnn-devel-ubuntu22.04"


def test_torch_variant_against_the_base() -> None:
    facts = with_image(
        host(), "myorg/train:1", cuda_version="12.4.1", torch_variant="12.1", torch_version="2.3.0+cu121"
    )
    derive(facts)
    assert facts.get("derived.image[0].torch_cuda_mismatch") is True
    assert facts.get("derived.image[0].torch_cuda_major_mismatch") is False
    same = with_image(host(), "myorg/train:2", cuda_version="12.1.1", torch_variant="12.1")
    derive(same)
    assert same.get("derived.image[0].torch_cuda_mismatch") is False


def test_a_missing_image_is_not_judged_but_its_tag_is() -> None:
    facts = host()
    facts.set("image[0].ref", "nvidia/cuda:11.4.3-base-ubuntu20.04")
    facts.set("image[0].found", False)
    facts.set("image[0].error", "no such image on this host")
    derive(facts)
    assert facts.reason("derived.image[0].require_satisfied") == "no such image on this host"
    assert facts.get("derived.image[0].tag_status") == "deleted"


def test_an_invalid_reference_has_no_tag_status() -> None:
    facts = host()
    facts.set("image[0].ref", "Not A Ref")
    facts.set("image[0].found", False)
    facts.set("image[0].error", "not a valid image reference: 'Not A Ref'")
    derive(facts)
    assert facts.get("derived.image[0].tag_status") == "invalid_reference"


ROWS = [
    {"version": "12.4", "status": "eol", "latest_patch": "12.4.1", "source": "policy"},
    {"version": "13.0", "status": "supported", "latest_patch": "13.0.2", "source": "notes"},
    {"version": "11.0", "status": "deleted", "latest_patch": "11.0.3", "source": "policy"},
]


@pytest.mark.parametrize(
    ("tag", "status", "latest"),
    [
        ("13.0.2-base-ubuntu24.04", "supported", "13.0.2-base-ubuntu24.04"),
        ("13.0.1-runtime-ubuntu22.04", "superseded", "13.0.2-runtime-ubuntu22.04"),
        ("12.4.0-devel-ubuntu22.04", "eol", "12.4.1-devel-ubuntu22.04"),
        ("11.0.3-base-ubuntu20.04", "deleted", "11.0.3-base-ubuntu20.04"),
        ("12.3-base", "not_a_release_tag", None),
        ("latest", "not_a_release_tag", None),
        ("14.1.0-base-ubuntu24.04", "unlisted", None),
    ],
)
def test_tag_status(tag: str, status: str, latest: str | None) -> None:
    assert tag_status(tag, ROWS)[:2] == (status, latest)


def test_the_shipped_tag_table_has_the_shape_the_checks_read() -> None:
    rows = load_tags()
    assert isinstance(rows, list) and rows
    for row in rows:
        assert row["status"] in ("supported", "eol", "deleted"), row
        assert str(row["latest_patch"]).startswith(str(row["version"]) + "."), row

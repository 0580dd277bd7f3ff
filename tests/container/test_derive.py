"""Derived container facts: requirements judged for the host, nvidia/cuda tag status, torch variants."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from cuda_doctor.container.derive import derive
from cuda_doctor.core.facts import Facts

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
    # 12.2.2 names its cuDNN tags cudnn8-: the suggestion takes that release's naming
    assert facts.get("derived.image[0].suggested_image") == "nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04"


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
    facts.set("image[0].ref", "nvidia/cuda:11.2.0-base-ubuntu20.04")
    facts.set("image[0].found", False)
    facts.set("image[0].error", "no such image on this host")
    derive(facts)
    assert facts.reason("derived.image[0].require_satisfied") == "no such image on this host"
    assert facts.get("derived.image[0].tag_status") == "removed"
    assert facts.get("derived.image[0].tag_suggested") == "nvidia/cuda:11.2.2-base-ubuntu20.04"


def test_an_invalid_reference_has_no_tag_status() -> None:
    facts = host()
    facts.set("image[0].ref", "Not A Ref")
    facts.set("image[0].found", False)
    facts.set("image[0].error", "not a valid image reference: 'Not A Ref'")
    derive(facts)
    assert facts.get("derived.image[0].tag_status") == "invalid_reference"


def test_a_torch_inside_keeps_the_suggested_tag_on_its_cuda() -> None:
    facts = with_image(host(), "nvidia/cuda:12.6.1-devel-ubuntu22.04", cuda_version="12.6.1", torch_variant="12.6")
    derive(facts)
    assert facts.get("derived.image[0].tag_status") == "unsupported"
    assert facts.get("derived.image[0].tag_suggested") == "nvidia/cuda:12.6.3-devel-ubuntu22.04"


def test_a_torch_mismatch_names_a_real_base_tag() -> None:
    facts = with_image(host(), "myorg/train:1", cuda_version="12.4.1", torch_variant="12.8")
    derive(facts)
    assert facts.get("derived.image[0].torch_base_image") == "nvidia/cuda:12.8.1-devel-ubuntu22.04"
    newer = with_image(host(), "myorg/train:1", cuda_version="13.0.2", torch_variant="13.2")
    derive(newer)
    assert newer.get("derived.image[0].torch_base_image") is None  # no verified 13.2 tag to name


def test_the_container_on_an_old_driver_gets_the_newest_base_it_runs() -> None:
    facts = host("470.82.01", "11.4")
    facts.set("container.cuda_version", "13.0.2")
    facts.set("container.nvidia_require_cuda", H200_REQUIRE)
    derive(facts)
    # 11.4.3 has no ubuntu22.04 image: the nearest Ubuntu it has
    assert facts.get("derived.container.suggested_image") == "nvidia/cuda:11.4.3-base-ubuntu20.04"


@functools.cache
def _rules() -> dict[str, Any]:
    from cuda_doctor.core.rules import load_rules

    return {r.id: r for r in load_rules() if r.id in ("CD904", "CD905")}


def _judged(ref: str, cuda: str, variant: str) -> tuple[Any, Any, Any, Any]:
    from cuda_doctor.core.rules import judge_rule

    rules = _rules()
    facts = with_image(host(), ref, cuda_version=cuda, torch_variant=variant, torch_version=f"2.9.0+cu{variant}")
    derive(facts)
    return judge_rule(rules["CD904"], facts)[0], judge_rule(rules["CD905"], facts)[0], facts, rules


def test_the_tag_rule_and_the_torch_rule_agree_and_reach_a_fixed_point() -> None:
    from cuda_doctor.container import tags

    one_per_flavour: dict[str, str] = {}
    for tag in sorted(tags.catalogue().state):
        if tag.endswith("ubuntu22.04") or tag.rsplit("-", 1)[0] not in one_per_flavour:
            one_per_flavour[tag.rsplit("-", 1)[0]] = tag
    for tag in [*one_per_flavour.values(), "12.4.3-devel-ubuntu22.04", "13.2.2-runtime-ubuntu24.04"]:
        for variant in ("11.8", "12.6", "12.8", "13.0", "13.2"):
            ref = f"nvidia/cuda:{tag}"
            cd904, cd905, facts, _ = _judged(ref, tag.split("-", 1)[0], variant)
            offered = {
                facts.get("derived.image[0].tag_suggested") if cd904.status.value not in ("pass", "skipped") else None,
                facts.get("derived.image[0].torch_base_image") if cd905.status.value == "warn" else None,
            } - {None}
            assert len(offered) <= 1, (tag, variant, offered)  # one recommendation
            if offered:
                (applied,) = offered
                assert tags.catalogue().state[applied.split(":", 1)[1]] == "supported"
                again_904, again_905, _, _ = _judged(applied, applied.split(":", 1)[1].split("-", 1)[0], variant)
                assert (again_904.status.value, again_905.status.value) == ("pass", "pass"), (tag, variant, applied)

"""Dockerfile tag checks (CDL101-CDL103) and the base-vs-wheel check (CDL105) agree.

Each suggestion is applied to the Dockerfile and the file is linted again: the tag check and
CDL105 must name the same tag, and once it is applied neither may fire again (a fixed point,
never a circle such as "use 13.2.2" followed by "base the image on CUDA 12.6").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cuda_doctor.container import tags
from cuda_doctor.core.results import Severity
from cuda_doctor.lint.dockerfile import base_image_reference, lint_dockerfile
from cuda_doctor.lint.engine import builtin_rules
from cuda_doctor.lint.findings import Hit

TAG_RULES = ("CDL101", "CDL102", "CDL103")
SUGGESTED = re.compile(r"`(?:docker\.io/|nvcr\.io/)?nvidia/cuda:(?P<tag>[^`]+)`")
#: torch pins whose wheel CUDA is known (the index URL names it); None: no torch at all.
WHEELS: list[str | None] = [
    None,
    "torch==2.7.1 --index-url https://download.pytorch.org/whl/cu118",
    "torch==2.5.1 --index-url https://download.pytorch.org/whl/cu121",
    "torch==2.6.0 --index-url https://download.pytorch.org/whl/cu124",
    "torch==2.9.0 --index-url https://download.pytorch.org/whl/cu126",
    "torch==2.9.0 --index-url https://download.pytorch.org/whl/cu128",
    "torch==2.8.0 --index-url https://download.pytorch.org/whl/cu129",
    "torch==2.11.0 --index-url https://download.pytorch.org/whl/cu130",
    "torch==2.15.0 --index-url https://download.pytorch.org/whl/cu132",
]


def lint(tag: str | None, wheel: str | None) -> list[Hit]:
    image = "nvidia/cuda" if tag is None else f"nvidia/cuda:{tag}"
    text = f"FROM {image}\n" + (f"RUN pip install {wheel}\n" if wheel else "")
    return lint_dockerfile(text, Path("Dockerfile"), lambda _path: None)


def suggestions(hits: list[Hit]) -> set[str]:
    found = set()
    for hit in hits:
        if hit.rule_id in (*TAG_RULES, "CDL105"):
            match = SUGGESTED.search(hit.capture_dict().get("fix", ""))
            if match:
                found.add(match.group("tag"))
    return found


def _input_tags() -> list[str | None]:
    """One tag per (version, flavour) the catalogue knows, on Ubuntu where it has it, and the
    forms it does not know."""
    cat = tags.catalogue()
    by_key: dict[str, str] = {}
    for tag in sorted(cat.state):
        key = tag.rsplit("-", 1)[0]
        if key not in by_key or "ubuntu" in tag:
            by_key[key] = tag
    made = ["12.4.3-base-ubuntu22.04", "12.3-base", "13.2.2-cudnn7-devel-ubuntu16.04", "14.0.0-devel-ubuntu24.04"]
    return [None, "latest", *sorted(by_key.values()), *made]


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: (w or "no torch").rsplit("/", 1)[-1])
def test_applying_the_suggestion_reaches_a_fixed_point(wheel: str | None) -> None:
    for tag in _input_tags():
        seen = [tag]
        for _ in range(3):
            hits = lint(seen[-1], wheel)
            offered = suggestions(hits)
            assert len(offered) <= 1, (seen, wheel, offered)  # one recommendation, not two
            if not offered:
                break
            (next_tag,) = offered
            assert tags.catalogue().state.get(next_tag) == "supported", (seen, wheel, next_tag)
            seen.append(next_tag)
        else:
            pytest.fail(f"no fixed point: {seen} with {wheel}")
        if len(seen) > 1:  # a suggestion was applied: nothing about the tag or the wheel is left
            left = [h.rule_id for h in lint(seen[-1], wheel) if h.rule_id in (*TAG_RULES, "CDL105")]
            assert left == [], (seen, wheel, left)


def test_the_reported_circle_is_gone() -> None:
    # a 12.6.3 base with a cu126 wheel: 12.6.3 is supported and matches the wheel
    assert lint("12.6.3-cudnn-devel-ubuntu22.04", WHEELS[4]) == []
    # an older 12.6 patch with a cu126 wheel: the latest 12.6 patch, never another CUDA
    hits = lint("12.6.1-cudnn-devel-ubuntu22.04", WHEELS[4])
    assert [h.rule_id for h in hits] == ["CDL103"]
    assert suggestions(hits) == {"12.6.3-cudnn-devel-ubuntu22.04"}


def test_a_wrong_base_for_the_wheel_gets_the_same_tag_from_both_checks() -> None:
    hits = lint("10.2-cudnn7-devel-ubuntu18.04", WHEELS[4])
    assert sorted(h.rule_id for h in hits) == ["CDL102", "CDL105"]
    assert suggestions(hits) == {"12.6.3-cudnn-devel-ubuntu20.04"}


def test_no_verified_tag_for_the_wheel_means_no_tag_is_suggested() -> None:
    hits = lint("12.4.3-devel-ubuntu22.04", WHEELS[-1])  # cu132: the catalogue has no verified 13.2 image
    fixes = {h.rule_id: h.capture_dict()["fix"] for h in hits}
    assert "no supported tag for CUDA 13.2" in fixes["CDL101"]
    assert "no supported nvidia/cuda tag of CUDA 13.2" in fixes["CDL105"]
    assert suggestions(hits) == set()


@pytest.mark.parametrize(
    ("tag", "rule", "severity"),
    [
        ("12.4.3-base-ubuntu22.04", "CDL101", None),  # never published: the rule's error
        ("13.2.2-base-ubuntu24.04", "CDL101", Severity.WARNING),  # newer than the catalogue
        ("12.9.2-base-ubuntu22.04", "CDL101", Severity.WARNING),
        ("10.2-cudnn7-devel-ubuntu18.04", "CDL102", None),
        ("11.3.1-cudnn8-runtime-ubuntu20.04", "CDL103", None),
    ],
)
def test_severity_follows_what_the_catalogue_can_settle(tag: str, rule: str, severity: Severity | None) -> None:
    (hit,) = lint(tag, None)
    assert (hit.rule_id, hit.severity) == (rule, severity)
    assert builtin_rules()[rule].severity is (Severity.ERROR if rule != "CDL103" else Severity.WARNING)


def test_an_unlisted_tag_is_checked_not_replaced() -> None:
    (hit,) = lint("13.2.2-base-ubuntu24.04", None)
    assert "docker manifest inspect nvidia/cuda:13.2.2-base-ubuntu24.04" in hit.capture_dict()["fix"]


def test_seen_but_unverified_tags_and_supported_ones_are_quiet() -> None:
    assert lint("13.2.1-devel-ubuntu24.04", None) == []
    assert lint("11.7.1-cudnn8-devel-ubuntu22.04", None) == []


def test_ngc_images_use_verified_rows_only() -> None:
    verified = "FROM nvcr.io/nvidia/pytorch:25.12-py3\nRUN pip install torch==2.9.0 --index-url https://download.pytorch.org/whl/cu126\n"
    hits = lint_dockerfile(verified, Path("Dockerfile"), lambda _path: None)
    assert [h.rule_id for h in hits] == ["CDL105"] and hits[0].capture_dict()["image_cuda"] == "13.1.0"
    unverified = verified.replace("25.12", "25.01")  # CUDA 12.8 only from a paste
    assert lint_dockerfile(unverified, Path("Dockerfile"), lambda _path: None) == []


def test_only_an_arg_before_the_first_from_names_the_base_image() -> None:
    """Docker gives a later stage's FROM no value from an ARG declared after the first FROM."""
    image = "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime"
    assert base_image_reference(f"ARG X={image}\nFROM $X\n") == image
    assert base_image_reference(f"FROM ${{BASE}}\nARG X={image}\nFROM $X\n") is None

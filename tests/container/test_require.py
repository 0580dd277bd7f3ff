"""NVIDIA_REQUIRE_* semantics, judged as the NVIDIA Container Toolkit judges them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.container.require import (
    Host,
    HostGPU,
    check_env,
    compare_versions,
    evaluate,
    legacy_cuda_requirement,
    parse_bool,
    required_cuda,
    requirements_from_env,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "container"
H200_REQUIRE = (FIXTURES / "h200-nvidia-require-cuda.txt").read_text().strip()

H200 = Host("580.159.04", "13.0", (HostGPU(brand="NVIDIA", arch="9.0"),))
OLD_TESLA = Host("470.82.01", "11.4", (HostGPU(brand="Tesla", arch="7.0"),))
OLD_NVIDIA = Host("470.82.01", "11.4", (HostGPU(brand="NVIDIA", arch="8.0"),))
OLD_UNKNOWN_BRAND = Host("470.82.01", "11.4", (HostGPU(brand=None, arch="8.0"),))
R535 = Host("535.104.05", "12.2", (HostGPU(brand="Tesla", arch="8.0"),))

IMAGE_12_2 = "cuda>=12.2 brand=tesla,driver>=470,driver<471"


def test_the_recorded_h200_requirement_holds_on_its_own_driver() -> None:
    result = evaluate([H200_REQUIRE], H200)
    assert result.satisfied is True
    assert result.required_cuda == "13.0"
    assert result.cuda_satisfied is True


def test_the_recorded_requirement_fails_on_an_old_driver_outside_every_forward_compat_window() -> None:
    result = evaluate([H200_REQUIRE], OLD_NVIDIA)
    assert result.satisfied is False
    assert result.detail.startswith("unsatisfied condition: cuda>=13.0, please update your driver")


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        (H200, True),  # the cuda>= clause holds
        (OLD_TESLA, True),  # OR: the forward-compatibility clause for Tesla on 470 holds
        (OLD_NVIDIA, False),  # brand differs: the toolkit says no
        (OLD_UNKNOWN_BRAND, None),  # we cannot tell without the brand
    ],
)
def test_space_separated_clauses_are_ored(host: Host, expected: bool | None) -> None:
    assert evaluate([IMAGE_12_2], host).satisfied is expected


def test_comma_separated_constraints_are_anded() -> None:
    # 535 supports CUDA 12.2, so cuda>=12.4 fails; the 470 window's driver<471 fails too.
    result = evaluate(["cuda>=12.4 brand=tesla,driver>=470,driver<471"], R535)
    assert result.satisfied is False
    assert result.failing == "driver<471"  # the last constraint that stopped a clause
    assert "cuda>=12.4" in result.detail


def test_several_variables_are_anded() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_ARCH": "arch>=9.0"}
    assert check_env(env, H200).satisfied is True
    ampere = Host("580.159.04", "13.0", (HostGPU(brand="NVIDIA", arch="8.0"),))
    result = check_env(env, ampere)
    assert result.satisfied is False
    assert result.failing == "arch>=9.0"
    assert result.detail == "unsatisfied condition: arch>=9.0"


def test_every_visible_gpu_must_satisfy_the_requirement() -> None:
    mixed = Host("470.82.01", "11.4", (HostGPU("Tesla", "7.0"), HostGPU("GeForce", "8.6")))
    assert evaluate([IMAGE_12_2], mixed).satisfied is False


def test_brand_and_arch_hold_when_no_gpu_is_visible() -> None:
    none_visible = Host("470.82.01", "11.4", ())
    assert evaluate(["brand=tesla,arch>=9.0"], none_visible).satisfied is True


def test_brand_comparison_ignores_case() -> None:
    assert evaluate(["brand=TESLA"], OLD_TESLA).satisfied is True
    assert evaluate(["brand!=tesla"], OLD_TESLA).satisfied is False


def test_jetpack_requirements_are_not_checked() -> None:
    exprs, disabled, error = requirements_from_env(
        {"NVIDIA_REQUIRE_JETPACK": "csv-mounts=all", "NVIDIA_REQUIRE_CUDA": "cuda>=11.0"}
    )
    assert exprs == ["cuda>=11.0"] and not disabled and error is None


@pytest.mark.parametrize(
    ("value", "disabled"),
    [("1", True), ("true", True), ("True", True), ("0", False), ("yes", False), ("", False)],
)
def test_disable_require_reads_like_go_parsebool(value: str, disabled: bool) -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=99.0", "NVIDIA_DISABLE_REQUIRE": value}
    result = check_env(env, H200)
    assert result.disabled is disabled
    assert result.satisfied is disabled  # cuda>=99.0 only passes when the check is off
    assert parse_bool(value) is disabled


def test_legacy_images_require_their_cuda_version_major_minor() -> None:
    exprs, _, _ = requirements_from_env({"CUDA_VERSION": "11.8.0"})
    assert exprs == ["cuda>=11.8"]
    assert check_env({"CUDA_VERSION": "11.8.0"}, OLD_TESLA).satisfied is False
    assert check_env({"CUDA_VERSION": "11.4.3"}, OLD_TESLA).satisfied is True
    # NVIDIA_REQUIRE_CUDA, when present, replaces the derived requirement
    assert requirements_from_env({"CUDA_VERSION": "11.8.0", "NVIDIA_REQUIRE_CUDA": "cuda>=11.0"})[0] == ["cuda>=11.0"]


def test_a_legacy_cuda_version_that_is_not_a_version_stops_the_container() -> None:
    result = check_env({"CUDA_VERSION": "eleven"}, H200)
    assert result.satisfied is False
    assert "invalid CUDA version" in result.detail


@pytest.mark.parametrize(
    ("version", "expected"), [("12.2.2", "12.2"), ("12", "12.0"), ("v11.8.0", "11.8"), ("x", None)]
)
def test_legacy_requirement(version: str, expected: str | None) -> None:
    assert legacy_cuda_requirement(version) == expected


def test_an_image_without_requirements_is_satisfied() -> None:
    result = check_env({"PATH": "/usr/bin"}, OLD_TESLA)
    assert result.satisfied is True and result.requirements == ()


def test_invalid_expressions_stop_the_container() -> None:
    for expr in ("cuda~12", "gpu>=1", "brand>=tesla", "cuda>=twelve"):
        result = evaluate([expr], H200)
        assert result.satisfied is False, expr
        assert "invalid expression" in result.detail


def test_unknown_driver_makes_the_verdict_unknown() -> None:
    result = evaluate(["cuda>=12.0"], Host(None, None, None))
    assert result.satisfied is None
    assert "version is unknown" in result.detail


def test_a_false_clause_decides_even_when_another_is_unknown() -> None:
    # cuda>=12.2 is false; the only other clause has a false driver constraint -> false.
    result = evaluate([IMAGE_12_2], Host("535.104.05", "12.1", (HostGPU(None, None),)))
    assert result.satisfied is False


@pytest.mark.parametrize(
    ("left", "op", "right", "expected"),
    [
        ("470.82.01", ">=", "470", True),
        ("470.82.01", "<", "471", True),
        ("580.159.04", "<", "471", False),
        ("12.10", ">", "12.9", True),
        ("13.0", "=", "13", True),
        ("13.0", "!=", "13.0.0", False),
        ("11.4", ">=", "12.2", False),
    ],
)
def test_versions_compare_by_number(left: str, op: str, right: str, expected: bool) -> None:
    assert compare_versions(left, op, right) is expected


def test_required_cuda_is_the_highest_cuda_constraint() -> None:
    assert required_cuda([IMAGE_12_2, "cuda>=11.0"]) == "12.2"
    assert required_cuda(["driver>=470"]) is None

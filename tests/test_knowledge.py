"""Knowledge-table helpers: NVIDIA version numbers and the CUDA ↔ driver table."""

from __future__ import annotations

import pytest

from cuda_doctor.knowledge import at_least, cuda_supported_by_driver, min_driver_for_cuda, nvidia_version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("580.159.04", (580, 159, 4)),
        ("535.104.05", (535, 104, 5)),
        ("12.4.1", (12, 4, 1)),
        ("12.4.0", (12, 4)),  # equal to "12.4", as packaging would have it
        ("12.4", (12, 4)),
        (" 581.42 ", (581, 42)),  # a Windows driver
        ("0", (0,)),
        (None, None),
        ("", None),
        ("580.159.04-beta", None),
        ("r580", None),
        ("12..4", None),
        ("-1.0", None),
    ],
)
def test_nvidia_version(text: object, expected: tuple[int, ...] | None) -> None:
    assert nvidia_version(text) == expected


@pytest.mark.parametrize(
    ("version", "floor", "expected"),
    [
        ("580.159.04", "580.65.06", True),
        ("580.65.06", "580.65.06", True),
        ("580.65.05", "580.65.06", False),
        ("525.60.13", "525.60.13", True),  # the CUDA 12 minor-version-compatibility floor itself
        ("525.60.2", "525.60.13", False),  # part by part, not as text
        ("1000.1", "999.99.99", True),
        ("535", "535.0.0", True),
        (None, "525.60.13", False),
        ("580.159.04", None, False),
        ("unknown", "525.60.13", False),
        ("580.159.04", "not a version", False),
    ],
)
def test_at_least(version: object, floor: object, expected: bool) -> None:
    assert at_least(version, floor) is expected


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [("13.0", "580.65.06"), ("12.4", "550.54.14"), ("11.8", "520.61.05"), ("9.9", None), ("x", None)],
)
def test_min_driver_for_cuda_is_the_ga_release_floor(cuda: str, driver: str | None) -> None:
    assert min_driver_for_cuda(cuda) == driver


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.159.04", "13.0"),
        ("535.104.05", "12.2"),
        ("470.82.01", "11.4"),
        ("390.1", None),  # older than every release in the table
        ("abc", None),
    ],
)
def test_cuda_supported_by_driver(driver: str, cuda: str | None) -> None:
    assert cuda_supported_by_driver(driver) == cuda


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, ("unset", None, None)),
        (" ", ("empty", 0, None)),
        ("1,0", ("ok", 2, None)),
        ("0,2,-1,1", ("invalid", 1, "'2' names no GPU on this machine")),
        ("7", ("hides_all", 0, "'7' names no GPU on this machine")),
        ("0,0", ("duplicate", 0, "'0' is listed twice")),
        ("GPU-3d95cf99", ("ok", 1, None)),  # a UUID prefix naming one GPU
        ("GPU-ffff", ("hides_all", 0, "'GPU-ffff' names no GPU on this machine")),
    ],
)
def test_visible_devices(raw: str | None, expected: tuple[object, ...]) -> None:
    from cuda_doctor.knowledge import visible_devices

    assert tuple(visible_devices(raw, 2, ["GPU-3d95cf99-d22a", "GPU-a3493707-0000"])) == expected

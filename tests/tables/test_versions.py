"""NVIDIA driver and CUDA version numbers, read and compared."""

from __future__ import annotations

import pytest

from cuda_doctor.tables.versions import at_least, nvidia_version


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

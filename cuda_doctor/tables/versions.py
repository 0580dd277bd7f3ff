"""NVIDIA driver and CUDA version numbers ("580.159.04", "12.4.1"), read and compared: plain dotted
numbers, not Python package versions (torch's "2.11.0+cu130" goes through ``packaging``)."""

from __future__ import annotations

import re


def nvidia_version(text: object) -> tuple[int, ...] | None:
    """The number as integers, trailing zeros dropped ("12.4" equals "12.4.0"); None when it is not one."""
    parts = str(text).strip().split(".")
    if not all(part.isdigit() for part in parts):  # also refuses None, "" and signs
        return None
    numbers = [int(part) for part in parts]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def at_least(version: object, floor: object) -> bool:
    """``version >= floor``; False when either cannot be read."""
    have, need = nvidia_version(version), nvidia_version(floor)
    return have is not None and need is not None and have >= need


def major_minor(text: object) -> tuple[int, int] | None:
    match = re.match(r"^\s*(\d+)\.(\d+)", str(text))
    return (int(match.group(1)), int(match.group(2))) if match else None


def release_of(text: object) -> str | None:
    """``"2.3.1"`` → ``"2.3"``: MAJOR.MINOR as text; None when ``text`` does not start with them."""
    parsed = major_minor(text)
    return f"{parsed[0]}.{parsed[1]}" if parsed else None

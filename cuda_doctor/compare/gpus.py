"""Per-GPU differences, in GPU order and said once when many GPUs share them: a 1-GPU and a
300-GPU report differ in 299 GPUs, which is one line to read, not thousands."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from cuda_doctor.core.reportfile import SavedReport

T = TypeVar("T")

#: Groups of at least this many GPUs are said once (fewer are listed one by one).
GROUP_FROM = 3
#: Ranges named in a list of GPUs before the rest is only counted.
RANGES_SHOWN = 8

_INDEXED = re.compile(r"^(?:gpu|smoke)\[(\d+)\]\.")
_GPU_SUBJECT = re.compile(r"^GPU (\d+)$")
_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sorts "GPU 2" before "GPU 10": numbers by value, the rest as text."""
    return tuple((1, int(part)) if part.isdigit() else (0, part) for part in _DIGITS.split(text) if part)


@dataclass(frozen=True)
class GpusOnlyIn:
    """GPUs one report has and the other has not."""

    side: str  # "before" or "after": the report that has them
    path: str
    gpus: tuple[int, ...]
    models: tuple[tuple[str, int], ...]  # (model, how many of them), most first


def gpu_indices(report: SavedReport) -> set[int]:
    """The GPU indices a report has facts about (``gpu[i].…``, ``smoke[i].…``)."""
    found: set[int] = set()
    for name in report.values:
        match = _INDEXED.match(name)
        if match:
            found.add(int(match.group(1)))
    return found


def gpus_only(before: SavedReport, after: SavedReport) -> tuple[GpusOnlyIn, ...]:
    old, new = gpu_indices(before), gpu_indices(after)
    sets = []
    for side, report, own, other in (("before", before, old, new), ("after", after, new, old)):
        alone = tuple(sorted(own - other))
        if alone:
            models = Counter(str(report.get(f"gpu[{i}].name") or "model unknown") for i in alone)
            sets.append(GpusOnlyIn(side, report.path, alone, tuple(models.most_common())))
    return tuple(sets)


def index_ranges(indices: Iterable[int], shown: int = RANGES_SHOWN) -> str:
    """``1–299``; ``0, 2, 5–9``; past ``shown`` ranges, the rest counted: ``…, and 40 more``."""
    ordered = sorted(set(indices))
    ranges: list[tuple[int, int]] = []
    for index in ordered:
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], index)
        else:
            ranges.append((index, index))
    words = [str(a) if a == b else f"{a}–{b}" for a, b in ranges[:shown]]
    rest = sum(b - a + 1 for a, b in ranges[shown:])
    return ", ".join(words) + (f", and {rest} more" if rest else "")


def gpus_text(indices: Sequence[int]) -> str:
    """``GPU 1–299 (299 GPUs)``, or ``GPU 3`` for one."""
    if len(indices) == 1:
        return f"GPU {indices[0]}"
    return f"GPU {index_ranges(indices)} ({len(indices)} GPUs)"


@dataclass(frozen=True)
class Group(Generic[T]):
    """Differences that are the same on several GPUs: ``members`` in GPU order, one per GPU;
    ``gpus`` empty for a difference that is not about one GPU."""

    members: tuple[T, ...]
    gpus: tuple[int, ...]

    @property
    def first(self) -> T:
        return self.members[0]


def grouped(
    items: Sequence[T], gpu_of: Callable[[T], int | None], same: Callable[[T], Hashable], least: int = GROUP_FROM
) -> list[Group[T]]:
    """``items`` in their order, those of one GPU that are ``same`` as those of at least
    ``least - 1`` other GPUs as one group at the place of its first; the rest one by one."""
    keyed: dict[Hashable, list[T]] = {}
    for item in items:
        if gpu_of(item) is not None:
            keyed.setdefault(same(item), []).append(item)
    out: list[Group[T]] = []
    said: set[Hashable] = set()
    for item in items:
        gpu = gpu_of(item)
        if gpu is None:
            out.append(Group((item,), ()))
            continue
        key = same(item)
        members = keyed[key]
        if len(members) < least:
            out.append(Group((item,), (gpu,)))
        elif key not in said:
            said.add(key)
            ordered = sorted(members, key=lambda member: gpu_of(member) or 0)
            out.append(Group(tuple(ordered), tuple(gpu_of(member) or 0 for member in ordered)))
    return out


def subject_gpu(subject: str | None) -> int | None:
    """``GPU 12`` → 12; None for a subject that is not one GPU."""
    match = _GPU_SUBJECT.match(subject or "")
    return int(match.group(1)) if match else None


def without_own_index(text: str, gpu: int) -> str:
    """``text`` with its GPU's own number masked: "ok on GPU 7" and "ok on GPU 8" say the same."""
    return re.sub(rf"\bGPU {gpu}\b", "GPU #", text)

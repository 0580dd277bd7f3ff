"""Which of a package's per-CUDA libraries loads (bitsandbytes ships libbitsandbytes_cuda118.so …
_cuda132.so and loads one): the file its loader picks for the CUDA version torch reports, or the
one a variable names (``rules/data/companions.toml``, ``variant_library``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from cuda_doctor.core.facts import Facts
from cuda_doctor.tables import load_table
from cuda_doctor.tables.versions import major_minor

#: The fact holding the value of each selecting variable in the framework's interpreter.
VARIABLES_FACT = "framework.library_variables"


@dataclass(frozen=True)
class VariantLibrary:
    name: str  # the distribution
    file: re.Pattern[str]  # group 1: the CUDA major, group 2: its minor
    variable: str
    nearest_since: str


@dataclass(frozen=True)
class Choice:
    """``loads``: the file name that loads (None: no variant does); ``known`` False when it cannot be told."""

    loads: str | None
    known: bool
    why: str


def variant_libraries() -> list[VariantLibrary]:
    rows = load_table("companions").get("variant_library", [])
    return [VariantLibrary(r["name"], re.compile(r["file"]), r["variable"], r["nearest_since"]) for r in rows]


def selecting_variables() -> list[str]:
    """The variables the framework probe reads in the trained interpreter's environment."""
    return sorted({row.variable for row in variant_libraries()})


def choose(
    row: VariantLibrary,
    version: object,
    files: list[str],
    torch_cuda: object,
    cuda_available: object,
    variable: str | None,
) -> Choice:
    """The variant of ``files`` (names) that ``row``'s package at ``version`` loads, as its loader
    does: none without a CUDA device; else the one ``variable`` names; else by torch's CUDA version."""
    if cuda_available is False:
        return Choice(None, True, "torch sees no CUDA device, so it loads its CPU library")
    if cuda_available is None:
        return Choice(None, False, "whether torch sees a CUDA device is unknown")
    nearest = _at_least(version, row.nearest_since)
    if nearest is None:
        return Choice(None, False, f"its version {version!r} cannot be read")
    if variable is not None and (variable or nearest):
        if nearest and not variable.isdigit():
            return Choice(None, True, f"{row.variable}={variable!r} is not digits: it raises at import")
        return Choice(_name_for(row, files, variable), True, f"{row.variable}={variable} names it")
    wanted = major_minor(torch_cuda)
    if wanted is None:
        return Choice(None, False, f"torch's CUDA version {torch_cuda!r} cannot be read")
    shipped: dict[tuple[int, int], str] = {}
    for name in files:
        match = row.file.match(name)
        if match:
            shipped[(int(match.group(1)), int(match.group(2)))] = name
    if wanted in shipped:
        return Choice(shipped[wanted], True, f"torch reports CUDA {torch_cuda}")
    if not nearest:
        return Choice(None, True, f"it ships no library for CUDA {torch_cuda}, and loads only that one")
    same = [v for v in shipped if v[0] == wanted[0]]
    below = [v for v in same if v < wanted]
    pick = max(below) if below else min(same) if same else None
    if pick is None:
        return Choice(None, True, f"it ships no library for CUDA {wanted[0]}")
    return Choice(shipped[pick], True, f"the nearest to CUDA {torch_cuda} of the same major")


def _name_for(row: VariantLibrary, files: list[str], digits: str) -> str | None:
    """The shipped file whose CUDA digits are ``digits`` (None when it ships no such file)."""
    for name in files:
        match = row.file.match(name)
        if match and match.group(1) + match.group(2) == digits:
            return name
    return None


def _at_least(version: object, floor: str) -> bool | None:
    try:
        return Version(str(version)) >= Version(floor)
    except InvalidVersion:
        return None


def not_loaded(facts: Facts, files: list[dict[str, Any]]) -> tuple[set[str], list[str]]:
    """The paths of variant libraries that nothing loads, and the cases that cannot be told (in
    words).  A variant whose choice is unknown is left out too: its kernels are no certain failure."""
    skipped: set[str] = set()
    unsure: list[str] = []
    variables = facts.get(VARIABLES_FACT) if facts.has(VARIABLES_FACT) else None
    for row in variant_libraries():
        mine = [f for f in files if f.get("distribution") == row.name and row.file.match(os.path.basename(f["path"]))]
        if not mine:
            continue
        if not isinstance(variables, dict):
            unsure.append(f"{row.name}: {row.variable} in the trained interpreter's environment is unknown")
            skipped.update(f["path"] for f in mine)
            continue
        names = [os.path.basename(f["path"]) for f in mine]
        value = variables.get(row.variable)
        torch_cuda = facts.get("torch.cuda_build") if facts.has("torch.cuda_build") else None
        available = facts.get("torch.cuda_available") if facts.has("torch.cuda_available") else None
        if facts.get("torch.hip_build"):
            available = False  # a ROCm torch loads the package's ROCm library
        choice = choose(row, mine[0].get("distribution_version"), names, torch_cuda, available, value)
        if not choice.known:
            unsure.append(f"{row.name}: which of its libraries loads is unknown ({choice.why})")
        skipped.update(f["path"] for f in mine if not choice.known or os.path.basename(f["path"]) != choice.loads)
    return skipped, unsure

"""Which PyTorch wheel to suggest: ``rules/data/torch_wheels.toml`` meets the GPUs, the driver and the
interpreter.  Pure functions of the tables: the derivers in ``framework.derive`` write the facts."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

from cuda_doctor.tables import load_table
from cuda_doctor.tables.driver import min_driver_for_cuda, mvc_floor
from cuda_doctor.tables.versions import at_least, major_minor, nvidia_version

Capability = tuple[int, int]


class Wheel(NamedTuple):
    release: str  # "2.11"
    variant: str  # "cu126"
    cuda: Capability  # (12, 6)
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    verified: bool  # the arch list was read from the wheel or its release branch's build script
    source: str


class Driver(NamedTuple):
    version: str | None  # "535.104.05"; None when only its CUDA version is known
    cuda: Capability  # the newest CUDA it supports fully


class Choice(NamedTuple):
    wheel: Wheel
    mode: str | None  # "full" | "mvc": how this driver runs it; None: it does not
    code: str  # "sass" | "ptx": what the GPUs run from it
    floor: str | None  # the lowest driver that runs it fully on these GPUs


class Plan(NamedTuple):
    now: Choice | None  # runs on this driver, the installed release first
    keep: Choice | None  # the installed release's wheel for these GPUs, whatever the driver
    target: Choice | None  # nothing runs now: the installed release's wheel, else the newest one
    python_only: bool = False  # no target only because no such release has a wheel for this Python


def variant_cuda(variant: str) -> Capability | None:
    """cu126 → (12, 6); cu118 → (11, 8); cu130 → (13, 0)."""
    match = re.fullmatch(r"cu(\d+)(\d)", variant)
    return (int(match.group(1)), int(match.group(2))) if match else None


def variant_of(cuda_build: object) -> str | None:
    """torch.version.cuda ("12.6") → "cu126"."""
    parsed = major_minor(cuda_build)
    return f"cu{parsed[0]}{parsed[1]}" if parsed else None


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


@functools.cache
def releases() -> tuple[dict[str, object], ...]:
    """The ``[[release]]`` rows, newest first."""
    rows = load_table("torch_wheels")["release"]
    return tuple(sorted(rows, key=lambda row: _release_key(str(row["torch"])), reverse=True))


@functools.cache
def wheels() -> tuple[Wheel, ...]:
    """Every ``[[wheel]]`` row whose release lists its variant, newest release first."""
    shipped = {(str(r["torch"]), str(v)) for r in releases() for v in r["variants"]}  # type: ignore[attr-defined]
    found = []
    for row in load_table("torch_wheels")["wheel"]:
        key = (str(row["torch"]), str(row["variant"]))
        cuda = variant_cuda(key[1])
        if key in shipped and cuda is not None:
            code = (tuple(row["sass"]), tuple(row["ptx"]))
            found.append(Wheel(*key, cuda, *code, bool(row["verified"]), str(row["source"])))
    return tuple(sorted(found, key=lambda w: _release_key(w.release), reverse=True))


def index_url(variant: str) -> str:
    return str(load_table("torch_wheels")["index_url"]).format(variant=variant)


@functools.cache
def python_ok(release: str, python: Capability | None) -> bool:
    """Whether ``release`` has wheels for this CPython (True when the version is not known)."""
    if python is None:
        return True
    for row in releases():
        if row["torch"] == release:
            low, high = (major_minor(v) for v in row["python"])  # type: ignore[attr-defined]
            return low is not None and high is not None and low <= python <= high
    return False


def arch_support(capability: object, arch_list: Sequence[str]) -> str:
    """'sass' (machine code runs as is), 'ptx' (the driver JIT-compiles PTX) or 'none'.  SASS for sm_XY
    runs on the same major with minor ≥ Y, sm_90a only on 9.0; PTX (compute_XY) JITs to any newer device."""
    cc = major_minor(capability)
    if cc is None:
        return "none"
    kinds: set[str] = set()
    for entry in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+?)(\d)([af]?)", entry.strip())
        if not match:
            continue
        kind, major, minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if kind == "sm":
            if (suffix and (major, minor) == cc) or (not suffix and major == cc[0] and minor <= cc[1]):
                kinds.add("sass")
        elif not suffix and (major, minor) <= cc:
            kinds.add("ptx")
    return "sass" if "sass" in kinds else ("ptx" if "ptx" in kinds else "none")


@functools.cache
def gpu_min_cuda(cc: Capability) -> Capability:
    """The first CUDA version that runs this architecture (the driver must support it fully)."""
    needed = (0, 0)
    for row in load_table("torch_wheels").get("gpu_min_cuda", []):
        if cc >= (major_minor(row["capability"]) or (99, 0)):
            needed = max(needed, major_minor(row["cuda"]) or (0, 0))
    return needed


@functools.cache
def _support(cc: Capability, arch_list: tuple[str, ...]) -> str:
    return arch_support(f"{cc[0]}.{cc[1]}", arch_list)


def code_for(wheel: Wheel, caps: Sequence[Capability]) -> str | None:
    """'sass' when every GPU has native code in the wheel, 'ptx' when some only have PTX, else None."""
    kinds = {_support(cc, wheel.sass + wheel.ptx) for cc in caps}
    if "none" in kinds:
        return None
    return "ptx" if "ptx" in kinds else "sass"


@functools.cache
def cuda_mode(cuda: Capability, driver: Driver) -> str | None:
    """'full' when the driver supports this CUDA, 'mvc' through minor-version compatibility, else None."""
    if cuda <= driver.cuda:
        return "full"
    if cuda[0] == driver.cuda[0] and at_least(driver.version, mvc_floor(cuda[0])):
        return "mvc"
    return None


@functools.cache
def driver_floor(wheel: Wheel, caps: tuple[Capability, ...]) -> str | None:
    """The lowest Linux driver that supports the wheel's CUDA, and every GPU's architecture, fully."""
    needed = [wheel.cuda, *(gpu_min_cuda(cc) for cc in caps)]
    floors = [min_driver_for_cuda(f"{c[0]}.{c[1]}") for c in needed if c != (0, 0)]
    if any(f is None for f in floors):
        return None
    return max((f for f in floors if f), key=lambda f: nvidia_version(f) or (), default=None)


def choice(wheel: Wheel, caps: tuple[Capability, ...], driver: Driver) -> Choice | None:
    """The wheel on these GPUs and this driver, or None; PTX runs only if the driver runs its CUDA fully."""
    code = code_for(wheel, caps)
    if code is None:
        return None
    mode = cuda_mode(wheel.cuda, driver) if all(driver.cuda >= gpu_min_cuda(cc) for cc in caps) else None
    if code == "ptx" and mode == "mvc":
        mode = None
    return Choice(wheel, mode, code, driver_floor(wheel, caps))


def _now_key(c: Choice) -> tuple[object, ...]:
    """Within a release: SASS, full support, a read arch list; then the newest CUDA if full, else the closest."""
    cuda = c.wheel.cuda if c.mode == "full" else (-c.wheel.cuda[0], -c.wheel.cuda[1])
    return (c.code == "sass", c.mode == "full", c.wheel.verified, cuda)


def _upgrade_key(c: Choice) -> tuple[object, ...]:
    """Within a release, native code and read arch lists, then the smallest driver upgrade."""
    floor = nvidia_version(c.floor) or (9999,)
    return (c.code == "sass", c.wheel.verified, tuple(-n for n in floor), _release_key(c.wheel.release))


def plan(
    installed: str | None,
    caps: Sequence[Capability],
    driver: Driver,
    python: Capability | None = None,
    *,
    native_only: bool = False,
) -> Plan:
    """The wheel to install with this driver (``now``), the ``installed`` release's own (``keep``), and
    when none runs, the one to install after a driver upgrade (``target``).  Other releases need wheels
    for ``python``; ``native_only``: only wheels with native code (SASS) for every GPU."""
    gpus = tuple(caps)
    every = [c for w in wheels() if (c := choice(w, gpus, driver)) is not None]
    if native_only:
        every = [c for c in every if c.code == "sass"]
    mine = [c for c in every if c.wheel.release == installed]
    keep = max(mine, key=_upgrade_key) if mine else None
    runnable = [c for c in mine if c.mode is not None]
    if runnable:
        return Plan(max(runnable, key=_now_key), keep, None)
    others = [c for c in every if c.mode is not None and python_ok(c.wheel.release, python)]
    if others:  # across releases, a read arch list beats a newer release's from release notes
        now = max(others, key=lambda c: (c.wheel.verified, _release_key(c.wheel.release), _now_key(c)))
        return Plan(now, keep, None)
    upgrades = [c for c in every if c.floor is not None and python_ok(c.wheel.release, python)]
    target = keep if keep is not None and keep.floor is not None else None
    if target is None and upgrades:  # the driver is upgraded anyway: the newest release
        target = max(upgrades, key=lambda c: (c.wheel.verified, _release_key(c.wheel.release), _upgrade_key(c)))
    python_only = target is None and any(c.floor is not None for c in every)
    return Plan(None, keep, target, python_only)

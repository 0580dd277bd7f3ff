"""The toolchain torch.compile and Triton need at their first compiled step (``compile.*``): a
child of the *target* interpreter (``_child.py``) finds the compilers, ``Python.h``, libcuda,
ptxas and the cache folders as Triton and Inductor would; here, the mounts under those caches
are read from ``/proc/self/mountinfo`` under ``ctx.root``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor.base import children
from cuda_doctor.base.process import CommandResult
from cuda_doctor.base.reading import read_text
from cuda_doctor.core.facts import Facts, reported
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.compile._child import CHILD_FACTS
from cuda_doctor.framework.compile.mounts import (
    Mount,
    inside_root,
    is_network,
    mount_of,
    nearest_existing,
    parse_mountinfo,
)

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
SMOKE_CHILD_SCRIPT = Path(__file__).with_name("smoke_child.py")
#: The smoke run's compile-level child, left by this probe for the smoke probe (``Handoff``).
COMPILE_CHILD = "compile"
#: The caches whose mounts are read: Triton's own, and Inductor's (which holds Triton's kernels
#: under torch.compile unless TRITON_CACHE_DIR is set).
CACHES = ("triton_cache", "inductor_cache")
MOUNT_FACTS = ("existing", "writable", "fstype", "mount_point", "options", "network", "readonly", "noexec")
CACHE_FACTS: tuple[str, ...] = tuple(f"compile.{cache}.{name}" for cache in CACHES for name in MOUNT_FACTS)
#: Every fact of this probe; each ends up known or unknown.
COMPILE_FACTS: tuple[str, ...] = (*CHILD_FACTS, *CACHE_FACTS, "compile.local_cache_base")
#: Where a driver's libcuda.so.1 usually is, besides what ldconfig and LD_LIBRARY_PATH say: the
#: container toolkit's folder, the distributions' library folders, WSL's.
LIBCUDA_FOLDERS = (
    "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
    "/usr/lib", "/usr/lib/wsl/lib",
)  # fmt: skip
#: /proc/self/mountinfo: some KB; hundreds of KB on a host with thousands of container mounts.
MAX_MOUNTINFO = 8 << 20
#: One ``--version`` or ``ldconfig -p`` at most; about seven of them run in the child.
VERSION_CALLS = 8


@dataclass
class CompileProbe:
    name: str = "compile"

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast  # --fast starts no child of the target interpreter

    def child_timeout(self, ctx: ProbeContext) -> float:
        return VERSION_CALLS * ctx.timeout + 10  # each call bounded by --timeout, and the start

    def deadline(self, ctx: ProbeContext) -> float:
        return self.child_timeout(ctx) + 10  # then killing and reading it

    def collect(self, ctx: ProbeContext) -> Facts:
        if ctx.smoke and ctx.handoff.accepting and spare_cores():
            # its imports overlap this phase and the smoke run's first levels (docs/compile.md)
            child = start_smoke_child(ctx, ctx.smoke_timeout + self.deadline(ctx) + 60)
            if child is not None:
                ctx.handoff.leave(COMPILE_CHILD, child)
        facts = self.toolchain(ctx)
        collect_caches(facts, ctx)
        return facts

    def toolchain(self, ctx: ProbeContext) -> Facts:
        try:
            source = children.compose(CHILD_SCRIPT)
        except OSError as exc:
            return all_unknown(f"cannot read the compile probe's source: {exc.strerror or exc}")
        timeout = self.child_timeout(ctx)
        config = {
            "timeout": ctx.timeout,
            "ldconfig": str(ctx.file("/sbin/ldconfig")),  # the program Triton runs, by that path
            "libcuda_folders": [str(ctx.file(folder)) for folder in LIBCUDA_FOLDERS],
        }
        report = ctx.step_progress
        result = children.run(
            ctx.python,
            source,
            [json.dumps(config)],
            env=ctx.env,
            timeout=timeout,
            start_timeout=children.start_timeout(ctx.timeout, timeout),
            on_step=None if report is None else lambda step: report("compile", step),
        )
        return interpret(result, ctx.python, timeout)


def spare_cores() -> bool:
    """Four cores or more: a child importing torch beside the others leaves their timings alone."""
    try:
        return len(os.sched_getaffinity(0)) >= 4
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) >= 4


def compile_cache_root(env: Mapping[str, str]) -> str | None:
    """Where the compile level keeps its toolchain folders: ``$XDG_CACHE_HOME/cuda-doctor/compile``
    (``~/.cache`` without it); None without either, and it compiles in a temporary folder."""
    base = env.get("XDG_CACHE_HOME") or (os.path.join(env["HOME"], ".cache") if env.get("HOME") else None)
    return os.path.join(base, "cuda-doctor", "compile") if base else None


def start_smoke_child(ctx: ProbeContext, timeout: float) -> children.Child | None:
    """The smoke run's compile-level child: it imports torch.compile's machinery, then waits for
    ``{"go": true}`` before it touches a GPU; None when its source cannot be read."""
    try:
        source = children.compose(SMOKE_CHILD_SCRIPT)
    except OSError:
        return None  # the smoke run starts it again and says why it could not
    config = json.dumps({"compile_cache": compile_cache_root(ctx.env)})
    start_timeout = children.start_timeout(ctx.timeout, timeout)
    return children.Child(
        ctx.python, source, [config], env=ctx.env, timeout=timeout, start_timeout=start_timeout, stdin=True
    )


def interpret(result: CommandResult, python: str, timeout: float) -> Facts:
    """The child's report as facts, or one reason for all of them."""
    reports = [r for r in children.parse_records(result.stdout) if "values" in r and "unknown" in r]
    if reports:
        return shape(reports[-1], python)
    if result.timed_out and not children.parse_records(result.stdout):
        return all_unknown(f"{python} did not start the compile probe (it printed nothing; is it a working Python?)")
    if result.timed_out:
        return all_unknown(f"{python} did not answer the compile probe in {timeout:g} s")
    if result.returncode is None:
        return all_unknown(f"could not run {python}: {result.error}")
    last = children.last_line(result.stderr.strip() or result.stdout) + children.cut_note(result)
    return all_unknown(f"{python} exited with status {result.returncode} in the compile probe{last}")


def shape(payload: Mapping[str, Any], python: str) -> Facts:
    """Keep the ``compile.`` facts of the child's report; say why any expected one is missing."""
    facts = reported(payload, ("compile.",), CHILD_FACTS, python)
    if facts is None:
        return all_unknown(f"{python} printed a compile report without 'values' and 'unknown' objects")
    return facts


def all_unknown(reason: str) -> Facts:
    facts = Facts()
    facts.mark_all_unknown(CHILD_FACTS, reason)
    return facts


# -- the caches' mounts ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Place:
    """Where a folder would be made: its nearest existing folder, that folder's mount, whether this
    user may create files there."""

    existing: str
    writable: bool
    mount: Mount | None


def collect_caches(facts: Facts, ctx: ProbeContext) -> None:
    try:
        mounts: list[Mount] | None = parse_mountinfo(read_text(ctx.file("/proc/self/mountinfo"), MAX_MOUNTINFO))
        no_mounts = ""
    except OSError as exc:
        mounts, no_mounts = None, f"cannot read /proc/self/mountinfo: {exc.strerror or exc}"
    for cache in CACHES:
        prefix = f"compile.{cache}."
        path = facts.get(prefix + "path")
        if not isinstance(path, str):
            reason = facts.unknown_reason(prefix + "path")
            facts.mark_all_unknown([prefix + name for name in MOUNT_FACTS], reason)
            continue
        if not os.path.isabs(path):
            why = f"{path} is a relative path: it depends on the folder training starts in"
            facts.mark_all_unknown([prefix + name for name in MOUNT_FACTS], why)
            continue
        put_place(facts, prefix, locate(ctx, path, mounts), no_mounts)
    facts.merge(local_base(facts, ctx, mounts))


def locate(ctx: ProbeContext, path: str, mounts: list[Mount] | None) -> Place | None:
    existing = nearest_existing(ctx.file(path), ctx.root)
    if existing is None:
        return None
    real = Path(os.path.realpath(existing))
    root = Path(os.path.realpath(ctx.root))
    shown = inside_root(real, root) if real == root or root in real.parents else inside_root(existing, ctx.root)
    mount = mount_of(shown, mounts) if mounts is not None else None
    writable = os.access(existing, os.W_OK | os.X_OK)
    return Place(shown, writable and not (mount is not None and "ro" in mount.options), mount)


def put_place(facts: Facts, prefix: str, place: Place | None, no_mounts: str) -> None:
    if place is None:
        facts.mark_all_unknown([prefix + name for name in MOUNT_FACTS], "no folder on its way exists")
        return
    facts.set(prefix + "existing", place.existing)
    facts.set(prefix + "writable", place.writable)
    mount = place.mount
    if mount is None:
        why = no_mounts or f"no mount in /proc/self/mountinfo holds {place.existing}"
        facts.mark_all_unknown([prefix + name for name in MOUNT_FACTS[2:]], why)
        return
    facts.set(prefix + "fstype", mount.fstype)
    facts.set(prefix + "mount_point", mount.point)
    facts.set(prefix + "options", list(mount.options))
    facts.set(prefix + "network", is_network(mount.fstype))
    facts.set(prefix + "readonly", "ro" in mount.options)
    facts.set(prefix + "noexec", "noexec" in mount.options)


def good(place: Place | None) -> bool:
    """A place for a cache: writable, local, and able to run what is built there."""
    if place is None or not place.writable or place.mount is None:
        return False
    mount = place.mount
    return not is_network(mount.fstype) and "noexec" not in mount.options and "ro" not in mount.options


def local_base(facts: Facts, ctx: ProbeContext, mounts: list[Mount] | None) -> Facts:
    """``compile.local_cache_base``: the first of the temporary folder, /var/tmp and the home folder
    that is local, writable and not noexec, for a fix to put the caches under."""
    out = Facts()
    if mounts is None:
        out.mark_unknown("compile.local_cache_base", "cannot read /proc/self/mountinfo")
        return out
    candidates = [facts.get("compile.temp_dir"), "/var/tmp", facts.get("compile.home")]
    for candidate in candidates:
        if isinstance(candidate, str) and os.path.isabs(candidate):
            place = locate(ctx, candidate, mounts)
            if good(place) and place is not None and place.existing == os.path.normpath(candidate):
                out.set("compile.local_cache_base", place.existing)
                return out
    out.set("compile.local_cache_base", None)
    return out


PROBE = CompileProbe()

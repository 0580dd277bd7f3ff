"""Derived facts: the one place where knowledge tables (``rules/data/*.toml``) meet probed facts.

Rules stay plain conditions because anything that needs a table lookup or a small algorithm
(which driver a CUDA build needs, whether a GPU's architecture is in the wheel, what
CUDA_VISIBLE_DEVICES really exposes) is computed here into ``derived.*`` facts.  Every
function reads facts, writes facts, and never raises: a missing input leaves the derived
fact unknown with the input's reason.  The tables are read by ``cuda_doctor.tables`` and NVIDIA
version numbers by ``cuda_doctor.versions``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from cuda_doctor import tomlcache
from cuda_doctor.facts import Facts, indexed
from cuda_doctor.optional import optional_attribute
from cuda_doctor.tables import load_table
from cuda_doctor.versions import at_least, major_minor, nvidia_version, release_of

if TYPE_CHECKING:  # imported where used: check --fast judges no wheel
    from cuda_doctor.wheels import Choice, Driver, Plan

Deriver = Callable[[Facts], None]


def _need(facts: Facts, out: str, *names: str) -> bool:
    """True when every input is known; otherwise mark ``out`` unknown with the first reason."""
    for name in names:
        if not facts.has(name):
            facts.mark_unknown(out, facts.unknown_reason(name))
            return False
    return True


# -- driver ↔ CUDA ------------------------------------------------------------------------------


@functools.cache
def min_driver_for_cuda(cuda: str) -> str | None:
    """Lowest Linux driver for the GA release of CUDA ``major.minor`` (e.g. "13.0" → 580.65.06)."""
    wanted = major_minor(cuda)
    if wanted is None:
        return None
    candidates = [
        row for row in load_table("cuda_driver")["release"] if major_minor(row["cuda"]) == wanted and row.get("linux")
    ]
    if not candidates:
        return None
    ga = min(candidates, key=lambda row: nvidia_version(row["cuda"]) or ())
    return str(ga["linux"])


def cuda_supported_by_driver(driver: str) -> str | None:
    """Newest CUDA ``major.minor`` whose GA floor this Linux driver meets (table-based)."""
    version = nvidia_version(driver)
    if version is None:
        return None
    rows = load_table("cuda_driver")["release"]
    found = [(nvidia_version(row.get("linux")), nvidia_version(row["cuda"])) for row in rows]
    best = max((cuda for floor, cuda in found if floor and cuda and version >= floor), default=None)
    return f"{best[0]}.{best[1] if len(best) > 1 else 0}" if best else None


def mvc_floor(major: int) -> str | None:
    return next((str(row["linux"]) for row in load_table("cuda_driver")["mvc"] if int(row["major"]) == major), None)


def derive_driver_support(facts: Facts) -> None:
    out = "derived.driver_cuda_support"
    build = facts.get("torch.cuda_build")
    if facts.has("torch.cuda_build") and build is None:
        facts.set(out, "not_applicable")  # CPU-only build: another rule says so
        return
    if not _need(facts, out, "torch.cuda_build", "driver.version"):
        return
    framework = major_minor(build)
    min_driver = min_driver_for_cuda(str(build))
    facts.set("derived.framework_cuda_min_driver", min_driver)
    driver_cuda = _driver_cuda(facts)
    facts.set("derived.driver_cuda", driver_cuda)
    supported = major_minor(driver_cuda)
    if framework is None or supported is None:
        facts.mark_unknown(out, f"cannot read CUDA versions ({build!r}, {driver_cuda!r})")
        return
    floor = mvc_floor(framework[0])
    facts.set("derived.framework_cuda_mvc_floor", floor)
    if supported >= framework:
        facts.set(out, "full")
    elif supported[0] == framework[0] and at_least(facts.get("driver.version"), floor):
        facts.set(out, "mvc")
    else:
        facts.set(out, "insufficient")


# -- which torch wheel to suggest -------------------------------------------------------------


def _capabilities(facts: Facts) -> list[tuple[int, int]]:
    caps = [major_minor(facts.get(indexed("gpu", i, "compute_capability"))) for i in facts.indices("gpu")]
    return [cc for cc in caps if cc is not None]


def _driver(facts: Facts) -> Driver | None:
    from cuda_doctor.wheels import Driver

    parsed = major_minor(_driver_cuda(facts))
    if parsed is None:
        return None
    version = facts.get("driver.version")
    return Driver(str(version) if version else None, parsed)


#: Where the inspected interpreter is named: the framework probe's, else the smoke run's.
_PYTHON_FACTS = ("framework.python", "jax.python", "smoke.python")


def pip_of(facts: Facts) -> str:
    """How every fix runs pip for the inspected interpreter: ``framework.pip`` (which knows
    whether plain ``pip`` is that interpreter's), else ``<python> -m pip`` with the interpreter a
    probe ran (quoted), else ``python3 -m pip`` (Debian and Ubuntu have no ``python`` command
    unless a package adds it)."""
    pip = facts.get("framework.pip")
    if isinstance(pip, str) and pip:
        return pip
    python = next((facts.get(name) for name in _PYTHON_FACTS if facts.get(name)), None)
    if not python:
        return "python3 -m pip"
    import shlex  # not at the top: the fast check, which probes no interpreter, never needs it

    return f"{shlex.quote(str(python))} -m pip"


class _Installed(NamedTuple):
    release: str | None  # "2.11"; None when torch is not installed
    version: str | None  # "2.11.0", the version a fix keeps
    variant: str | None  # "cu130"; None for a CPU-only build or no torch


def _installed(facts: Facts) -> _Installed:
    from cuda_doctor.wheels import variant_of

    if facts.get("torch.installed") is not True:
        return _Installed(None, None, None)
    base = facts.get("torch.version_base")
    return _Installed(release_of(base), str(base) if base else None, variant_of(facts.get("torch.cuda_build")))


def derive_wheel_suggestion(facts: Facts) -> None:
    """``derived.torch_*``: the wheel for every GPU of this machine that this driver runs."""
    if any(facts.get(name) for name in ("framework.pip", *_PYTHON_FACTS)):
        facts.set("derived.pip", pip_of(facts))
    else:
        facts.mark_unknown("derived.pip", "the interpreter to install into was not inspected")
    if not facts.has("torch.installed"):  # framework not probed (--fast): no rule needs a wheel
        reason = facts.reason("torch.installed") or "the framework was not probed"
        facts.mark_all_unknown(("derived.torch_plan", "derived.torch_install_command"), reason)
        return
    driver = _driver(facts)
    if driver is None:
        reason = facts.reason("driver.cuda_version") or "the driver's CUDA version is unknown"
        facts.mark_all_unknown(("derived.torch_plan", "derived.torch_install_command"), reason)
        return
    from cuda_doctor.wheels import index_url, plan

    installed = _installed(facts)
    caps = _capabilities(facts)
    python = major_minor(facts.get("framework.python_version"))
    found = plan(installed.release, caps, driver, python)
    pip = pip_of(facts)
    facts.set("derived.torch_uninstall_command", f"{pip} uninstall -y torch")
    best = _installed_is_best(found, installed, driver)
    write_plan(facts, "derived.torch_", found, installed, driver, caps, pip, best)
    if found.now is not None and not best:
        facts.set("derived.torch_suggested_variant", found.now.wheel.variant)
        facts.set("derived.torch_suggested_release", found.now.wheel.release)
        facts.set("derived.torch_suggested_mode", found.now.mode)
        facts.set("derived.torch_index_url", index_url(found.now.wheel.variant))


def _installed_is_best(found: Plan, installed: _Installed, driver: Driver) -> bool:
    """The installed CUDA wheel runs on this driver at least as well as the suggestion would."""
    from cuda_doctor.wheels import cuda_mode, variant_cuda

    if found.now is None or installed.variant is None:
        return False
    now = found.now.wheel
    if (now.release, now.variant) == (installed.release, installed.variant):
        return True
    cuda = variant_cuda(installed.variant)
    mine = cuda_mode(cuda, driver) if cuda else None
    return mine == "full" or (mine == "mvc" and found.now.mode == "mvc")


def write_plan(
    facts: Facts,
    prefix: str,
    found: Plan,
    installed: _Installed,
    driver: Driver,
    caps: list[tuple[int, int]],
    pip: str,
    best: bool = False,
    native: bool = False,
) -> None:
    """``<prefix>plan`` and the facts its fixes print (``install_command``, ``suggestion``,
    ``keep_*``, ``upgrade_*``, ``why``); a command the plan has no use for is unknown, with why.
    ``native``: the plan asked for native code only."""
    gpus = ", ".join(f"{cc[0]}.{cc[1]}" for cc in caps) or "these GPUs"
    code = "native code" if native else "code"
    on_driver = f"driver {driver.version or '?'} (CUDA {driver.cuda[0]}.{driver.cuda[1]})"
    if best and installed.variant:
        kind, why = "installed_best", f"the installed {installed.variant} wheel is already the best {on_driver} runs"
    elif found.now is not None:
        kind = "install"
        if found.now.wheel.release != installed.release and found.keep is not None and found.keep.mode is None:
            kind = "upgrade_or_install"
        why = f"{_describe(found.now, installed, driver)} runs on {on_driver}"
    elif found.target is not None:
        kind = "upgrade"
        why = f"no PyTorch wheel runs on {on_driver} with {code} for compute capability {gpus}"
    elif found.python_only:
        kind = "no_wheel"
        why = f"no PyTorch release with {code} for compute capability {gpus} has a wheel for this Python"
    else:
        kind = "no_wheel"
        why = f"no PyTorch release in cuda-doctor's wheel table has {code} for compute capability {gpus}"
    facts.set(prefix + "plan", kind)
    facts.set(prefix + "why", why)
    runs = kind in ("install", "upgrade_or_install")
    missing = why + ": only a driver upgrade helps" if kind in ("upgrade", "installed_best") else why
    for part, chosen, reason in (
        ("", found.now if runs else None, missing),
        ("keep_", found.keep if kind == "upgrade_or_install" else None, why),
        ("upgrade_", found.target if kind == "upgrade" else None, why),
    ):
        keys = ("install_command", "suggestion", "driver") if part else ("install_command", "suggestion")
        names = [prefix + part + key for key in keys]
        if chosen is None:
            facts.mark_all_unknown(names, reason)
            continue
        facts.set(names[0], install_command(chosen, installed, pip))
        facts.set(names[1], _describe(chosen, installed, driver))
        if part:  # the driver that the kept or the upgraded wheel needs
            facts.set(names[2], chosen.floor)


def _pin(chosen: Choice, installed: _Installed) -> str:
    """The installed release keeps its exact version; another release is any of its patches."""
    if chosen.wheel.release == installed.release and installed.version:
        return installed.version
    return f"{chosen.wheel.release}.*"


def install_command(chosen: Choice, installed: _Installed, pip: str) -> str:
    from cuda_doctor.wheels import index_url

    url = index_url(chosen.wheel.variant)
    return f"{pip} install 'torch=={_pin(chosen, installed)}' --index-url {url}"


def _describe(chosen: Choice, installed: _Installed, driver: Driver) -> str:
    """The wheel in words: "torch 2.11.0 built for CUDA 12.6 (cu126)", and in the parentheses how
    this driver runs it and where its list of GPU architectures comes from when not from the wheel."""
    wheel = chosen.wheel
    pin = _pin(chosen, installed).removesuffix(".*")
    notes = [wheel.variant]
    if chosen.mode == "mvc":
        notes.append(f"driver {driver.version} runs it through minor-version compatibility")
    if chosen.code == "ptx":
        notes.append("the GPU runs its PTX, compiled by the driver at first start")
    if not wheel.verified:
        notes.append(
            "its GPU architecture list is from PyTorch's release notes, not read from the wheel:"
            " check torch.cuda.get_arch_list() after installing"
        )
    return f"torch {pin} built for CUDA {wheel.cuda[0]}.{wheel.cuda[1]} ({'; '.join(notes)})"


def _driver_cuda(facts: Facts) -> str | None:
    """The newest CUDA the driver runs: NVML's answer, else the table's for the driver version."""
    if facts.get("driver.cuda_version"):
        return str(facts.get("driver.cuda_version"))
    return cuda_supported_by_driver(facts.get("driver.version")) if facts.has("driver.version") else None


# -- GPU architecture in the wheel -------------------------------------------------------------


def derive_arch(facts: Facts) -> None:
    arch_list = facts.get("torch.arch_list")
    for i in facts.indices("gpu"):
        out = f"derived.gpu[{i}].arch_support"
        cap = facts.get(indexed("gpu", i, "compute_capability"))
        parsed = major_minor(cap)
        if parsed:
            facts.set(f"derived.gpu[{i}].sm", f"sm_{parsed[0]}{parsed[1]}")
            facts.set(f"derived.gpu[{i}].amp_dtype", amp_dtype(parsed))
            facts.set(f"derived.gpu[{i}].arch_advice", arch_advice(parsed))
        if facts.get("torch.cuda_build") is None and facts.has("torch.cuda_build"):
            facts.set(out, "not_applicable")
            continue
        if not _need(facts, out, indexed("gpu", i, "compute_capability"), "torch.arch_list"):
            continue
        if not arch_list:
            facts.mark_unknown(out, "the framework reported no compiled architectures")
            continue
        from cuda_doctor.wheels import arch_support

        support = arch_support(str(cap), list(arch_list))
        facts.set(out, support)
        if support != "sass":
            _arch_plan(facts, i, parsed, native_only=support == "ptx")


def _arch_plan(facts: Facts, index: int, cc: tuple[int, int] | None, native_only: bool) -> None:
    """``derived.gpu[i].arch_*``: a wheel with code for this GPU (native code when the installed
    one has its PTX already) that this driver runs."""
    prefix = f"derived.gpu[{index}].arch_"
    driver = _driver(facts)
    if cc is None or driver is None:
        reason = facts.reason("driver.cuda_version") or "the driver's CUDA version is unknown"
        facts.mark_all_unknown((prefix + "plan", prefix + "install_command"), reason)
        return
    from cuda_doctor.wheels import plan

    installed = _installed(facts)
    python = major_minor(facts.get("framework.python_version"))
    found = plan(installed.release, [cc], driver, python, native_only=native_only)
    write_plan(facts, prefix, found, installed._replace(variant=None), driver, [cc], pip_of(facts), native=native_only)


def amp_dtype(cc: tuple[int, int]) -> str:
    if cc >= (8, 0):
        return "bfloat16"
    if cc >= (7, 0):
        return "float16"
    return "none"


#: (lowest compute capability, which wheels carry code for it), newest first (rules/data/torch_wheels.toml).
_ARCH_ADVICE = (
    ((13, 0), "a wheel built for this architecture (none in cuda-doctor's wheel table has native code for it)"),
    ((10, 0), "torch >= 2.7 with cu128 or newer (sm_100/sm_120 first ship in cu128 wheels)"),
    ((9, 0), "a torch wheel built for CUDA 11.8 or newer (sm_90)"),
    ((7, 5), "a torch wheel whose arch list includes this GPU"),
    ((7, 0), "a cu126 or older wheel, or cu128 of torch 2.8 to 2.10 (CUDA 13 builds start at sm_75)"),
    ((5, 0), "a cu126 or older wheel (cu128 and newer builds start at sm_70 or sm_75)"),
    ((3, 7), "torch 2.7 or older with cu118 or older (the last wheels with sm_37)"),
    ((0, 0), "a torch release older than 1.13 (no wheel from 1.13 on has code for it)"),
)


def arch_advice(cc: tuple[int, int]) -> str:
    """Which wheels carry code for this architecture, in words."""
    return next(advice for floor, advice in _ARCH_ADVICE if cc >= floor)


# -- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------------


class VisibleDevices(NamedTuple):
    status: str  # unset | empty | ok | duplicate | invalid | hides_all
    visible: int | None  # how many GPUs CUDA exposes; None when unset (all of them)
    problem: str | None = None


def visible_devices(
    raw: str | None, count: object, uuids: list[str], mig_parents: Mapping[str, int] | None = None
) -> VisibleDevices:
    """What CUDA_VISIBLE_DEVICES really exposes (CUDA Programming Guide semantics): the list
    stops at the first entry that names no GPU, and a GPU listed twice exposes none.  A MIG
    UUID (``MIG-…``) exposes that MIG instance of its GPU; ``mig_parents`` lists the instances
    that exist (UUID → the GPU's index), None when they are not known here."""
    if raw is None:
        return VisibleDevices("unset", None)
    if raw.strip() == "":
        return VisibleDevices("empty", 0)
    seen: list[str] = []
    for entry in (e.strip() for e in raw.split(",")):
        resolved = _resolve_device(entry, count, uuids, mig_parents)
        if resolved is None:
            why = f"'{entry}' names no GPU on this machine"
            return VisibleDevices("invalid" if seen else "hides_all", len(seen), why)
        if resolved[0] in seen:
            return VisibleDevices("duplicate", 0, f"'{entry}' is listed twice")
        seen.append(resolved[0])
    return VisibleDevices("ok", len(seen))


def visible_gpus(
    raw: str | None, uuids: list[str], mig_parents: Mapping[str, int] | None = None
) -> tuple[VisibleDevices, list[int | None]]:
    """``visible_devices`` on the GPUs NVML lists, with the index of the GPU behind each device
    CUDA exposes, in CUDA's order: a MIG instance's is its parent's, None where not known."""
    found = visible_devices(raw, len(uuids), uuids, mig_parents)
    if raw is None:
        return found, list(range(len(uuids)))
    if found.status not in ("ok", "invalid"):
        return found, []
    exposed = [e.strip() for e in raw.split(",")][: found.visible]
    resolved = [_resolve_device(e, len(uuids), uuids, mig_parents) for e in exposed]
    return found, [None if device is None else device[1] for device in resolved]


def derive_visible_devices(facts: Facts) -> None:
    if not facts.has("env.cuda_visible_devices"):
        facts.mark_unknown("derived.cvd.status", facts.unknown_reason("env.cuda_visible_devices"))
        return
    raw = facts.get("env.cuda_visible_devices")
    count = facts.get("gpu.count")
    uuids = [str(facts.get(indexed("gpu", i, "uuid")) or "") for i in facts.indices("gpu")]
    mig = [facts.get(indexed("gpu", i, "mig_enabled")) for i in facts.indices("gpu")]
    no_mig = bool(mig) and all(enabled is False for enabled in mig)  # then no MIG instance exists
    found = visible_devices(None if raw is None else str(raw), count, uuids, {} if no_mig else None)
    facts.set("derived.cvd.status", found.status)
    if found.status == "unset":
        return
    facts.set("derived.cvd.visible", found.visible)
    if found.status == "empty":
        return
    facts.set("derived.cvd.problem", found.problem)
    facts.set("derived.cvd.gpu_count", count)
    # how many GPUs there are to name, in words: also when the count is unknown
    if isinstance(count, int) and not isinstance(count, bool):
        here = f"this machine has {count} GPU{'' if count == 1 else 's'}"
    else:
        here = f"the number of GPUs here is unknown: {facts.unknown_reason('gpu.count')}"
    facts.set("derived.cvd.gpus_here", here)


def _resolve_device(
    entry: str, count: object, uuids: list[str], mig_parents: Mapping[str, int] | None
) -> tuple[str, int | None] | None:
    """The device an entry names, as (what tells it from the others, the index of its GPU or None
    where not known here); None when it names no device."""
    if re.fullmatch(r"\d+", entry):
        if isinstance(count, int) and int(entry) >= count:
            return None
        return f"#{int(entry)}", int(entry)
    if entry.startswith("MIG-"):
        return _resolve_mig(entry, uuids, mig_parents)
    if entry.startswith("GPU-"):
        matches = [i for i, u in enumerate(uuids) if u and u.startswith(entry)]
        if uuids and len(matches) != 1:
            return None
        return (uuids[matches[0]], matches[0]) if matches else (entry, None)
    return None


def _resolve_mig(entry: str, uuids: list[str], mig_parents: Mapping[str, int] | None) -> tuple[str, int | None] | None:
    if mig_parents is not None:
        matches = [uuid for uuid in mig_parents if uuid.startswith(entry)]
        return (matches[0], mig_parents[matches[0]]) if len(matches) == 1 else None
    if entry.startswith("MIG-GPU-"):  # the R450/R460 form: MIG-GPU-<its GPU's UUID>/<GI>/<CI>
        gpu = _resolve_device(entry[len("MIG-") :].split("/")[0], None, uuids, None)
        return None if gpu is None else (entry, gpu[1])
    return entry, None  # the MIG instances are not listed here: the entry is taken on trust


# -- environment details -----------------------------------------------------------------------

#: NCCL variables documented for debugging, not production ("should not be used in production
#: nor retained in scripts"): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
NCCL_DEBUG_VARIABLES = (
    "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_P2P_LEVEL", "NCCL_ALGO", "NCCL_PROTO",
    "NCCL_BUFFSIZE", "NCCL_NTHREADS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_CHECKS_DISABLE",
    "NCCL_CHECK_POINTERS", "NCCL_LAUNCH_MODE",
)  # fmt: skip


def derive_environment(facts: Facts) -> None:
    nccl = facts.get("env.nccl")
    if isinstance(nccl, dict):
        left = sorted(k for k in nccl if k in NCCL_DEBUG_VARIABLES and str(nccl[k]).strip() not in ("",))
        facts.set("derived.nccl_debug_vars", [f"{k}={nccl[k]}" for k in left])
        facts.set("derived.nccl_unset_command", "unset " + " ".join(left) if left else None)
    elif not facts.has("env.nccl"):
        facts.mark_unknown("derived.nccl_debug_vars", facts.unknown_reason("env.nccl"))
    shm = facts.get("system.shm_bytes")
    if isinstance(shm, (int, float)):
        facts.set("derived.shm_mib", round(shm / 2**20))
    nvcc = major_minor(facts.get("toolkit.nvcc_version"))
    build = major_minor(facts.get("torch.cuda_build"))
    if nvcc and build:
        facts.set("derived.nvcc_major_differs", nvcc[0] != build[0])
    elif facts.has("toolkit.nvcc_version") and facts.get("toolkit.nvcc_version") is None:
        facts.set("derived.nvcc_major_differs", False)
    for i in facts.indices("gpu"):
        names = facts.get(indexed("gpu", i, "clock_event_reason_names"))
        if isinstance(names, list):
            slow = [n for n in names if n in ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")]
            facts.set(f"derived.gpu[{i}].slowdown_reasons", slow)


#: Every deriver, in order.  Feature modules add theirs to this one list.
#: A deriver listed with fact prefixes runs (and is imported) only when such facts exist.
DERIVERS: list[str | tuple[str, tuple[str, ...]]] = [
    "cuda_doctor.knowledge:derive_driver_support",
    "cuda_doctor.knowledge:derive_wheel_suggestion",
    "cuda_doctor.knowledge:derive_arch",
    "cuda_doctor.knowledge:derive_visible_devices",
    ("cuda_doctor.memory_health:derive", ("gpu[",)),
    "cuda_doctor.fabric_health:derive",
    "cuda_doctor.nvlink_health:derive",
    "cuda_doctor.knowledge:derive_environment",
    ("cuda_doctor.container.derive:derive", ("container.cuda_version", "container.nvidia_require", "image[")),
    ("cuda_doctor.smoke.expected:derive", ("smoke",)),
    ("cuda_doctor.jax.derive:derive", ("jax.",)),
    "cuda_doctor.nccl.derive:derive",  # also says why the all-reduce did not run
    ("cuda_doctor.libraries.pins:derive", ("torch.installed", "dist[")),
    ("cuda_doctor.libraries.loaded:derive", ("framework.cuda_library_count", "cudalib[")),  # before the two below
    ("cuda_doctor.libraries.import_error:derive", ("torch.import_error",)),
    ("cuda_doctor.libraries.cuda_init:derive", ("torch.installed", "smoke.driver_level.", "kernel.", "cudalib[")),
    ("cuda_doctor.libraries.companions:derive", ("companion[",)),
    ("cuda_doctor.fatbin.derive:derive", ("fatbin.",)),
]


def import_derivers() -> None:
    """Import every deriver's module now, ahead of ``derive_all``: a full check does it while its
    probes wait on their children, so that judging starts as soon as they are done."""
    for entry in DERIVERS:
        spec = entry if isinstance(entry, str) else entry[0]
        try:
            optional_attribute(*spec.split(":"))
        except Exception:  # derive_all imports it again, and records why it failed
            continue


def derive_all(facts: Facts) -> list[str]:
    """Run every deriver; return one message per deriver that broke (they never stop the run)."""
    problems: list[str] = []
    names = [name for name, value in facts.values.items() if value is not None] + list(facts.unknown)
    for entry in DERIVERS:
        spec, prefixes = (entry, ()) if isinstance(entry, str) else entry
        if prefixes and not any(name.startswith(prefixes) for name in names):
            continue  # nothing for it to derive from: skip even its import
        try:
            func: Deriver | None = optional_attribute(*spec.split(":"))
            if func is not None:  # None: the module is not part of this build
                func(facts)
        except Exception as exc:  # a broken deriver must not hide the other checks
            problems.append(f"{spec}: {type(exc).__name__}: {exc}")
    tomlcache.flush()  # the tables the derivers parsed, in one write
    return problems

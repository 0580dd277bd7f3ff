"""Derived facts: the one place where knowledge tables (``rules/data/*.toml``) meet probed facts.

Rules stay plain conditions because anything that needs a table lookup or a small algorithm
(which driver a CUDA build needs, whether a GPU's architecture is in the wheel, what
CUDA_VISIBLE_DEVICES really exposes) is computed here into ``derived.*`` facts.  Every
function reads facts, writes facts, and never raises: a missing input leaves the derived
fact unknown with the input's reason.  The tables are read by ``cuda_doctor.tables`` and NVIDIA
version numbers by ``cuda_doctor.versions``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from cuda_doctor import tomlcache
from cuda_doctor.facts import Facts, indexed
from cuda_doctor.optional import import_optional
from cuda_doctor.tables import load_table
from cuda_doctor.versions import at_least, major_minor, nvidia_version

Deriver = Callable[[Facts], None]


def _need(facts: Facts, out: str, *names: str) -> bool:
    """True when every input is known; otherwise mark ``out`` unknown with the first reason."""
    for name in names:
        if not facts.has(name):
            facts.mark_unknown(out, facts.unknown_reason(name))
            return False
    return True


# -- driver ↔ CUDA ------------------------------------------------------------------------------


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
    best: tuple[int, ...] | None = None
    for row in load_table("cuda_driver")["release"]:
        floor = nvidia_version(row.get("linux"))
        cuda = nvidia_version(row["cuda"])
        if floor is not None and cuda is not None and version >= floor and (best is None or cuda > best):
            best = cuda
    return f"{best[0]}.{best[1] if len(best) > 1 else 0}" if best else None


def mvc_floor(major: int) -> str | None:
    for row in load_table("cuda_driver")["mvc"]:
        if int(row["major"]) == major:
            return str(row["linux"])
    return None


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


# -- which torch wheel fits this driver ------------------------------------------------------


def _variant_cuda(variant: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"cu(\d+)(\d)", variant)
    return (int(match.group(1)), int(match.group(2))) if match else None


def variant_runs_on(variant: str, capabilities: list[tuple[int, int]]) -> bool:
    """Whether a wheel variant carries native code for every one of these GPUs."""
    for row in load_table("torch_wheels").get("arch", []):
        if variant in row["variants"]:
            low = major_minor(row["min"]) or (0, 0)
            return all(low <= cc and cc[0] <= int(row["max_major"]) for cc in capabilities)
    return not capabilities  # a variant the table does not describe: only when nothing is asked


def gpu_min_cuda(cc: tuple[int, int]) -> tuple[int, int]:
    """The first CUDA version that runs this architecture (the driver must support it fully)."""
    needed = (0, 0)
    for row in load_table("torch_wheels").get("gpu_min_cuda", []):
        if cc >= (major_minor(row["capability"]) or (99, 0)):
            needed = max(needed, major_minor(row["cuda"]) or (0, 0))
    return needed


class WheelChoice(NamedTuple):
    release: str
    variant: str
    mode: str  # "full": the driver supports its CUDA; "mvc": through minor-version compatibility


def best_variant(
    torch_release: str | None,
    driver_cuda: tuple[int, int],
    driver: str | None = None,
    capabilities: list[tuple[int, int]] | None = None,
) -> WheelChoice | None:
    """The wheel to suggest: one this driver runs and that has native code for these GPUs.

    The installed release comes first (with a variant the driver fully supports, else one that
    runs through minor-version compatibility, as PyTorch's own CUDA 12 wheels rely on for
    drivers ≥ 525.60.13); then the newest release that has such a variant.
    """
    from packaging.version import Version

    caps = capabilities or []
    releases = load_table("torch_wheels")["release"]
    ordered = sorted(releases, key=lambda row: Version(row["torch"]), reverse=True)
    if torch_release is not None:
        mine = major_minor(torch_release)
        ordered = [r for r in ordered if major_minor(r["torch"]) == mine] + [
            r for r in ordered if major_minor(r["torch"]) != mine
        ]
    floor = mvc_floor(driver_cuda[0])
    mvc_ok = at_least(driver, floor)
    if any(driver_cuda < gpu_min_cuda(cc) for cc in caps):
        return None  # the driver predates the GPU's architecture: no wheel helps

    def mode(variant: str) -> str | None:
        cuda = _variant_cuda(variant)
        if cuda is None or not variant_runs_on(variant, caps):
            return None
        if cuda <= driver_cuda:
            return "full"
        if cuda[0] == driver_cuda[0] and mvc_ok:
            return "mvc"
        return None

    for row in ordered:
        for wanted in ("full", "mvc"):
            fitting = [v for v in row["variants"] if mode(v) == wanted]
            if fitting:
                # fully supported: the newest; through compatibility: the closest to the driver
                pick = max if wanted == "full" else min
                best = pick(fitting, key=lambda v: _variant_cuda(v) or (0, 0))
                return WheelChoice(str(row["torch"]), best, wanted)
    return None


def _installed_variant(facts: Facts) -> str | None:
    build = major_minor(facts.get("torch.cuda_build"))
    return f"cu{build[0]}{build[1]}" if build else None


def _capabilities(facts: Facts) -> list[tuple[int, int]]:
    caps = [major_minor(facts.get(indexed("gpu", i, "compute_capability"))) for i in facts.indices("gpu")]
    return [cc for cc in caps if cc is not None]


def derive_wheel_suggestion(facts: Facts) -> None:
    out = "derived.torch_suggested_variant"
    if not facts.has("torch.installed"):  # framework not probed (--fast): no rule needs a wheel
        facts.mark_unknown(out, facts.reason("torch.installed") or "the framework was not probed")
        return
    driver_cuda = _driver_cuda(facts)
    parsed = major_minor(driver_cuda)
    if parsed is None:
        facts.mark_unknown(out, facts.reason("driver.cuda_version") or "the driver's CUDA version is unknown")
        return
    base = facts.get("torch.version_base")
    caps = _capabilities(facts)
    choice = best_variant(str(base) if base else None, parsed, facts.get("driver.version"), caps)
    gpus = ", ".join(f"{cc[0]}.{cc[1]}" for cc in caps)
    if choice is None:
        why = f"no PyTorch wheel runs on driver {facts.get('driver.version')} (CUDA {driver_cuda})"
        reason = why + (f" with native code for compute capability {gpus}" if gpus else "")
        facts.mark_unknown(out, reason + ": only a driver upgrade helps")
        facts.mark_unknown("derived.torch_install_command", reason + ": only a driver upgrade helps")
        return
    same_release = bool(base) and major_minor(base) == major_minor(choice.release)
    if same_release and choice.variant == _installed_variant(facts):
        reason = (
            f"the installed {choice.variant} wheel is already the best this driver runs; only a driver upgrade helps"
        )
        facts.mark_unknown(out, reason)
        facts.mark_unknown("derived.torch_install_command", reason)
        return
    url, command = _install(base, choice)
    facts.set(out, choice.variant)
    facts.set("derived.torch_suggested_release", choice.release)
    facts.set("derived.torch_suggested_mode", choice.mode)
    facts.set("derived.torch_index_url", url)
    facts.set("derived.torch_install_command", command)


def _driver_cuda(facts: Facts) -> str | None:
    """The newest CUDA the driver runs: NVML's answer, else the table's for the driver version."""
    if facts.get("driver.cuda_version"):
        return str(facts.get("driver.cuda_version"))
    return cuda_supported_by_driver(facts.get("driver.version")) if facts.has("driver.version") else None


def _install(base: object, choice: WheelChoice) -> tuple[str, str]:
    """The index URL and the pip command for ``choice``, keeping the installed release's exact
    version when the choice is that release."""
    url = load_table("torch_wheels")["index_url"].format(variant=choice.variant)
    same_release = bool(base) and major_minor(base) == major_minor(choice.release)
    pin = str(base) if same_release else f"{choice.release}.*"
    return url, f"pip install 'torch=={pin}' --index-url {url}"


# -- GPU architecture in the wheel -------------------------------------------------------------


def arch_support(capability: str, arch_list: list[str]) -> str:
    """'sass' (machine code runs as is), 'ptx' (the driver JIT-compiles PTX) or 'none'.

    SASS for sm_XY runs on devices of the same major with minor ≥ Y; arch-specific targets
    (sm_90a) run only on that exact capability; PTX (compute_XY) JITs to any newer device.
    """
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


def derive_arch(facts: Facts) -> None:
    arch_list = facts.get("torch.arch_list")
    for i in facts.indices("gpu"):
        out = f"derived.gpu[{i}].arch_support"
        cap = facts.get(indexed("gpu", i, "compute_capability"))
        if cap is not None:
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
        support = arch_support(str(cap), list(arch_list))
        facts.set(out, support)
        if support != "sass":
            _arch_command(facts, i, major_minor(cap))


def _arch_command(facts: Facts, index: int, cc: tuple[int, int] | None) -> None:
    """The install command for a wheel with native code for this GPU that this driver runs."""
    out = f"derived.gpu[{index}].arch_install_command"
    driver_cuda_text = _driver_cuda(facts)
    driver_cuda = major_minor(driver_cuda_text)
    if cc is None or driver_cuda is None:
        facts.mark_unknown(out, facts.reason("driver.cuda_version") or "the driver's CUDA version is unknown")
        return
    base = facts.get("torch.version_base")
    choice = best_variant(str(base) if base else None, driver_cuda, facts.get("driver.version"), [cc])
    if choice is None:
        facts.mark_unknown(
            out,
            f"no PyTorch wheel with native code for compute capability {cc[0]}.{cc[1]} runs on driver "
            f"{facts.get('driver.version')} (CUDA {driver_cuda_text}): upgrade the driver first",
        )
        return
    facts.set(out, _install(base, choice)[1])


def amp_dtype(cc: tuple[int, int]) -> str:
    if cc >= (8, 0):
        return "bfloat16"
    if cc >= (7, 0):
        return "float16"
    return "none"


def arch_advice(cc: tuple[int, int]) -> str:
    if cc >= (10, 0):
        return "torch >= 2.7 with cu128 or newer (sm_100/sm_120 first ship in cu128 wheels)"
    if cc >= (9, 0):
        return "a torch wheel built for CUDA 11.8 or newer (sm_90)"
    if cc < (5, 0):
        return "an old torch release with Kepler support (CUDA 12 removed sm_35/37)"
    if cc < (7, 5):
        return "a cu126 or older wheel (CUDA 13 builds start at sm_75)"
    return "a torch wheel whose arch list includes this GPU"


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
    return found, [_gpu_index(_resolve_device(e, len(uuids), uuids, mig_parents)) for e in exposed]


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


def _gpu_index(resolved: tuple[str, int | None] | None) -> int | None:
    return None if resolved is None else resolved[1]


# -- environment details -----------------------------------------------------------------------

#: NCCL variables documented for debugging, not production ("should not be used in production
#: nor retained in scripts"): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
NCCL_DEBUG_VARIABLES = (
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_BUFFSIZE",
    "NCCL_NTHREADS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_CHECKS_DISABLE",
    "NCCL_CHECK_POINTERS",
    "NCCL_LAUNCH_MODE",
)


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
    "cuda_doctor.knowledge:derive_environment",
    ("cuda_doctor.container.derive:derive", ("container.cuda_version", "container.nvidia_require", "image[")),
    ("cuda_doctor.smoke.expected:derive", ("smoke",)),
    "cuda_doctor.nccl.derive:derive",  # also says why the all-reduce did not run
]


def _resolve(spec: str) -> Deriver | None:
    module_name, _, attr = spec.partition(":")
    module = import_optional(module_name)
    if module is None:
        return None
    func: Deriver = getattr(module, attr)
    return func


def derive_all(facts: Facts) -> list[str]:
    """Run every deriver; return one message per deriver that broke (they never stop the run)."""
    problems: list[str] = []
    names = [name for name, value in facts.values.items() if value is not None] + list(facts.unknown)
    for entry in DERIVERS:
        spec, prefixes = (entry, ()) if isinstance(entry, str) else entry
        if prefixes and not any(name.startswith(prefixes) for name in names):
            continue  # nothing for it to derive from: skip even its import
        try:
            func = _resolve(spec)
            if func is None:
                continue
            func(facts)
        except Exception as exc:  # a broken deriver must not hide the other checks
            problems.append(f"{spec}: {type(exc).__name__}: {exc}")
    tomlcache.flush()  # the tables the derivers parsed, in one write
    return problems

"""The framework build against this driver and these GPUs: whether the driver runs the CUDA the
build needs, which wheel to suggest, and whether each GPU's architecture is in the build."""

from __future__ import annotations

from typing import NamedTuple

from cuda_doctor.core.facts import Facts, indexed, need
from cuda_doctor.core.fixes import PYTHON_FACTS, pip_of
from cuda_doctor.tables.driver import min_driver_for_cuda, mvc_floor, newest_cuda
from cuda_doctor.tables.versions import at_least, major_minor, release_of
from cuda_doctor.tables.wheels import (
    Choice,
    Driver,
    Plan,
    arch_support,
    cuda_mode,
    index_url,
    plan,
    variant_cuda,
    variant_of,
)


def derive_driver_support(facts: Facts) -> None:
    out = "derived.driver_cuda_support"
    build = facts.get("torch.cuda_build")
    if facts.has("torch.cuda_build") and build is None:
        facts.set(out, "not_applicable")  # CPU-only build: another rule says so
        return
    if not need(facts, out, "torch.cuda_build", "driver.version"):
        return
    framework = major_minor(build)
    facts.set("derived.framework_cuda_min_driver", min_driver_for_cuda(str(build)))
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


def _capabilities(facts: Facts) -> list[tuple[int, int]]:
    caps = [major_minor(facts.get(indexed("gpu", i, "compute_capability"))) for i in facts.indices("gpu")]
    return [cc for cc in caps if cc is not None]


def _driver(facts: Facts) -> Driver | None:
    parsed = major_minor(_driver_cuda(facts))
    if parsed is None:
        return None
    version = facts.get("driver.version")
    return Driver(str(version) if version else None, parsed)


class _Installed(NamedTuple):
    release: str | None  # "2.11"; None when torch is not installed
    version: str | None  # "2.11.0", the version a fix keeps
    variant: str | None  # "cu130"; None for a CPU-only build or no torch


def _installed(facts: Facts) -> _Installed:
    if facts.get("torch.installed") is not True:
        return _Installed(None, None, None)
    base = facts.get("torch.version_base")
    return _Installed(release_of(base), str(base) if base else None, variant_of(facts.get("torch.cuda_build")))


def derive_wheel_suggestion(facts: Facts) -> None:
    """``derived.torch_*``: the wheel for every GPU of this machine that this driver runs."""
    if any(facts.get(name) for name in ("framework.pip", *PYTHON_FACTS)):
        facts.set("derived.pip", pip_of(facts))
    else:
        facts.mark_unknown("derived.pip", "the interpreter to install into was not inspected")
    if not facts.has("torch.installed"):  # framework not probed (--fast): no rule needs a wheel
        reason = facts.reason("torch.installed") or "the framework was not probed"
        facts.mark_all_unknown(("derived.torch_plan", "derived.torch_install_command"), reason)
        return
    driver = _driver(facts)
    if driver is None:
        _no_driver(facts, "derived.torch_")
        return
    installed = _installed(facts)
    caps = _capabilities(facts)
    found = plan(installed.release, caps, driver, major_minor(facts.get("framework.python_version")))
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
    """``<prefix>plan`` and the commands its fixes print; a command the plan has no use for is unknown."""
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
        kind, why = "upgrade", f"no PyTorch wheel runs on {on_driver} with {code} for compute capability {gpus}"
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
    url = index_url(chosen.wheel.variant)
    return f"{pip} install 'torch=={_pin(chosen, installed)}' --index-url {url}"


def _describe(chosen: Choice, installed: _Installed, driver: Driver) -> str:
    """The wheel in words: "torch 2.11.0 built for CUDA 12.6 (cu126; how this driver runs it)"."""
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
    return newest_cuda(facts.get("driver.cuda_version"), facts.get("driver.version"))


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
        if not need(facts, out, indexed("gpu", i, "compute_capability"), "torch.arch_list"):
            continue
        if not arch_list:
            facts.mark_unknown(out, "the framework reported no compiled architectures")
            continue
        support = arch_support(str(cap), list(arch_list))
        facts.set(out, support)
        if support != "sass":
            _arch_plan(facts, i, parsed, native_only=support == "ptx")


def _arch_plan(facts: Facts, index: int, cc: tuple[int, int] | None, native_only: bool) -> None:
    """``derived.gpu[i].arch_*``: a wheel with (native, when the installed has PTX) code for this GPU."""
    prefix = f"derived.gpu[{index}].arch_"
    driver = _driver(facts)
    if cc is None or driver is None:
        _no_driver(facts, prefix)
        return
    installed = _installed(facts)
    python = major_minor(facts.get("framework.python_version"))
    found = plan(installed.release, [cc], driver, python, native_only=native_only)
    write_plan(facts, prefix, found, installed._replace(variant=None), driver, [cc], pip_of(facts), native=native_only)


def _no_driver(facts: Facts, prefix: str) -> None:
    reason = facts.reason("driver.cuda_version") or "the driver's CUDA version is unknown"
    facts.mark_all_unknown((prefix + "plan", prefix + "install_command"), reason)


def amp_dtype(cc: tuple[int, int]) -> str:
    if cc >= (8, 0):
        return "bfloat16"
    if cc >= (7, 0):
        return "float16"
    return "none"


#: (lowest compute capability, which wheels carry code for it), newest first.
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

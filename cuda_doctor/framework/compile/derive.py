"""What the compile toolchain means for a compiled step on this machine (``derived.compile.*``):
each GPU against Triton's floor and against the ptxas Triton runs for it (``rules/data/ptxas.toml``),
that ptxas against the driver, the compilers, ``Python.h``, libcuda and the caches, and the exact
commands that fix them here (argv quoted with ``shlex``)."""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Sequence
from typing import Any, NamedTuple

from cuda_doctor.core.facts import Facts, indexed, need
from cuda_doctor.tables import load_table
from cuda_doctor.tables.versions import major_minor

#: Triton's floor: "Triton only supports devices of CUDA Capability >= 7.0" (its NVIDIA backend;
#: torch.compile says "too old to be supported by the triton GPU compiler").
TRITON_MIN_CAPABILITY = (7, 0)
#: From this capability on Triton runs ``ptxas-blackwell`` where it has one (compiler.py ``get_ptxas``).
BLACKWELL = 10
OUT = "derived.compile."

#: Package names by package family: the C compiler, the C++ compiler, Python's headers.
PACKAGES = {
    "debian": {"cc": ["gcc"], "cxx": ["g++"], "headers": ["python{version}-dev"]},
    "rhel": {"cc": ["gcc"], "cxx": ["gcc-c++"], "headers": ["python3-devel"]},
    "suse": {"cc": ["gcc"], "cxx": ["gcc-c++"], "headers": ["python3-devel"]},
}
INSTALLERS: dict[str, list[list[str]]] = {
    "debian": [["apt-get", "update"], ["apt-get", "install", "-y"]],
    "rhel": [["dnf", "install", "-y"]],
    "suse": [["zypper", "--non-interactive", "install"]],
}


def derive(facts: Facts) -> None:
    _gpus(facts)
    _c_compiler(facts)
    _cxx_compiler(facts)
    _python_h(facts)
    _libcuda(facts)
    _ptxas_arch(facts)
    _ptxas_driver(facts)
    _caches(facts)


# -- shared ---------------------------------------------------------------------------------------------
def joined(*argvs: Sequence[str]) -> str:
    """One command line from argvs, each word quoted, joined with ``&&``."""
    return " && ".join(shlex.join(argv) for argv in argvs)


def install_command(facts: Facts, out: str, what: str, **names: str) -> None:
    """``out``: this machine's package manager installing the packages of ``what``, with sudo unless root."""
    family = facts.get("system.os_family")
    if family not in INSTALLERS:
        if facts.has("system.os_family"):
            facts.mark_unknown(out, f"no known package manager for {facts.get('system.os') or 'this system'}")
        else:
            facts.mark_unknown(out, facts.unknown_reason("system.os_family"))
        return
    sudo = [] if facts.get("system.is_root") is True else ["sudo"]
    packages = [name.format(**names) for name in PACKAGES[family][what]]
    steps = [[*sudo, *argv] for argv in INSTALLERS[family]]
    steps[-1] += packages
    facts.set(out, joined(*steps))


def gpu_label(facts: Facts, i: int) -> str:
    name = facts.get(indexed("gpu", i, "name"))
    return f"GPU {i} ({name})" if name else f"GPU {i}"


def gpu_capabilities(facts: Facts, out: str) -> list[tuple[int, str, tuple[int, int]]] | None:
    """(index, label, capability) of every GPU; None (``out`` unknown, with why) when not all are known."""
    if not need(facts, out, "gpu.count"):
        return None
    found = []
    for i in facts.indices("gpu"):
        name = indexed("gpu", i, "compute_capability")
        cc = major_minor(facts.get(name))
        if cc is None:
            facts.mark_unknown(out, facts.reason(name) or f"the compute capability of {gpu_label(facts, i)} is unknown")
            return None
        found.append((i, gpu_label(facts, i), cc))
    return found


def version_of(text: Any) -> tuple[int, int] | None:
    return major_minor(text) if isinstance(text, str) else None


def shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


# -- GPUs against Triton's floor ----------------------------------------------------------------------------
def _gpus(facts: Facts) -> None:
    out = OUT + "gpus_below_minimum"
    gpus = gpu_capabilities(facts, out)
    if gpus is None:
        facts.mark_unknown(OUT + "gpu_capabilities", facts.unknown_reason(out))
        return
    facts.set(OUT + "gpu_capabilities", [f"{label}: compute capability {shown(cc)}" for _, label, cc in gpus])
    low = [f"{label}, compute capability {shown(cc)}" for _, label, cc in gpus if cc < TRITON_MIN_CAPABILITY]
    facts.set(out, low)


# -- compilers and headers ------------------------------------------------------------------------------
def compiler_state(facts: Facts, prefix: str) -> str | None:
    """ "ok", "missing" (no compiler to run) or "broken" (it does not run); None when unknown."""
    name, works = facts.get(f"compile.{prefix}"), facts.get(f"compile.{prefix}_works")
    if not facts.has(f"compile.{prefix}") or not isinstance(works, bool):
        return None
    if works:
        return "ok"
    return "missing" if name is None or (prefix == "cxx" and facts.get("compile.cxx_path") is None) else "broken"


def _c_compiler(facts: Facts) -> None:
    state = compiler_state(facts, "cc")
    if state is None:
        missing = "compile.cc" if not facts.has("compile.cc") else "compile.cc_works"
        facts.mark_all_unknown((OUT + "cc_state", OUT + "cc_command"), facts.unknown_reason(missing))
        return
    facts.set(OUT + "cc_state", state)
    if state == "ok":
        return
    path_cc = facts.get("compile.cc_on_path")
    if facts.get("compile.cc_source") == "CC" and path_cc:
        facts.set(OUT + "cc_command", shlex.join(["unset", "CC"]))  # Triton then takes PATH's
        return
    install_command(facts, OUT + "cc_command", "cc")


def _cxx_compiler(facts: Facts) -> None:
    state = compiler_state(facts, "cxx")
    if state is None:
        missing = "compile.cxx" if not facts.has("compile.cxx") else "compile.cxx_works"
        facts.mark_all_unknown((OUT + "cxx_state", OUT + "cxx_command"), facts.unknown_reason(missing))
        return
    facts.set(OUT + "cxx_state", state)
    if state != "ok":
        install_command(facts, OUT + "cxx_command", "cxx")


def _python_h(facts: Facts) -> None:
    out = OUT + "python_h_command"
    if facts.get("compile.python_h") is not False:
        return
    include = facts.get("compile.python_include")
    if not isinstance(include, str) or not include.startswith("/usr/include/"):
        facts.mark_unknown(out, f"the headers belong to the Python that owns {include}, not to a system package")
        return
    version = version_of(facts.get("compile.python_version"))
    install_command(facts, out, "headers", version=shown(version) if version else "3")


# -- libcuda ----------------------------------------------------------------------------------------------
class Link(NamedTuple):
    file: str  # the file the linker must find: libcuda.so for -lcuda, libcuda.so.1 for -l:libcuda.so.1
    flag: str


def link_of(facts: Facts) -> Link | None:
    """What the launcher links: the driver module's ``libraries``; where unreadable, the triton
    release (3.6 links libcuda.so.1: triton-lang/triton#8668)."""
    libraries = facts.get("compile.libcuda_libraries")
    if isinstance(libraries, list) and libraries:
        first = str(libraries[0])
        return Link(first, f"-l:{first}") if ".so" in first else Link(f"lib{first}.so", f"-l{first}")
    version = version_of(facts.get("compile.triton_version"))
    if version is None:
        return None
    return Link("libcuda.so.1", "-l:libcuda.so.1") if version >= (3, 6) else Link("libcuda.so", "-lcuda")


def _libcuda(facts: Facts) -> None:
    out = OUT + "libcuda_state"
    names = (out, OUT + "libcuda_file", OUT + "libcuda_flag", OUT + "libcuda_command")
    if not need(facts, out, "compile.libcuda_dirs", "compile.libcuda_so1_dirs", "compile.libcuda_so_dirs"):
        facts.mark_all_unknown(names[1:], facts.unknown_reason(out))
        return
    link = link_of(facts)
    if link is None:
        facts.mark_all_unknown(names, "which libcuda file this triton links is not known")
        return
    facts.set(OUT + "libcuda_file", link.file)
    facts.set(OUT + "libcuda_flag", link.flag)
    dirs = facts.get("compile.libcuda_dirs") or []
    with_so1 = facts.get("compile.libcuda_so1_dirs") or []
    with_link = with_so1 if link.file == "libcuda.so.1" else (facts.get("compile.libcuda_so_dirs") or [])
    pinned = facts.get("compile.libcuda_source") == "TRITON_LIBCUDA_PATH"
    if not dirs or (not pinned and not with_so1):
        facts.set(out, "not_found")  # AssertionError: libcuda.so cannot found!
        error = facts.get("compile.libcuda_error")
        facts.set(
            OUT + "libcuda_detail", error or "ldconfig -p lists no libcuda.so.1, and no LD_LIBRARY_PATH entry holds it"
        )
    elif not with_link:
        facts.set(out, "not_linkable")  # /usr/bin/ld: cannot find -lcuda
    else:
        facts.set(out, "ok")
        return
    _libcuda_fix(facts, link)


def _libcuda_fix(facts: Facts, link: Link) -> None:
    out = OUT + "libcuda_command"
    candidates = [str(c) for c in facts.get("compile.libcuda_candidates") or []]
    if not candidates:
        facts.mark_unknown(out, "no folder here holds libcuda.so.1, the driver's library: is the driver installed?")
        return
    if link.file == "libcuda.so.1":
        facts.set(out, joined(["export", f"TRITON_LIBCUDA_PATH={candidates[0]}"]))
        return
    # -lcuda needs libcuda.so: a folder of this user's with that name for the driver's libcuda.so.1
    home = facts.get("compile.home")
    if not isinstance(home, str) or not os.path.isabs(home):
        facts.mark_unknown(out, "no home folder to keep a link to libcuda.so.1 in")
        return
    folder = os.path.join(home, ".triton", "libcuda")
    target = os.path.join(candidates[0], "libcuda.so.1")
    steps = (["mkdir", "-p", folder], ["ln", "-sf", target, os.path.join(folder, "libcuda.so")])
    facts.set(out, joined(*steps, ["export", f"TRITON_LIBCUDA_PATH={folder}"]))


# -- ptxas ------------------------------------------------------------------------------------------------
class Arch(NamedTuple):
    target: str  # what Triton passes as --gpu-name
    cuda: tuple[int, int]  # the first CUDA release whose ptxas knows it


@functools.cache
def arch_table() -> dict[tuple[int, int], Arch]:
    table: dict[tuple[int, int], Arch] = {}
    for row in load_table("ptxas")["arch"]:
        cc, cuda = major_minor(row["capability"]), major_minor(row["cuda"])
        if cc is not None and cuda is not None:
            table[cc] = Arch(str(row["target"]), cuda)
    return table


class Tool(NamedTuple):
    path: str | None
    version: tuple[int, int] | None
    source: str | None
    error: str | None
    env: str  # the variable that points Triton at another one


def tool_for(facts: Facts, cc: tuple[int, int]) -> Tool:
    """The ptxas Triton runs for a GPU of capability ``cc``."""
    key = "ptxas_blackwell" if cc[0] >= BLACKWELL and facts.get("compile.ptxas_split") is True else "ptxas"
    env = "TRITON_PTXAS_BLACKWELL_PATH" if key == "ptxas_blackwell" else "TRITON_PTXAS_PATH"
    path, source = facts.get(f"compile.{key}_path"), facts.get(f"compile.{key}_source")
    error = facts.get(f"compile.{key}_error")
    return Tool(path, version_of(facts.get(f"compile.{key}_version")), source, error, env)


def described(tool: Tool) -> str:
    bundled = {"triton": "bundled with triton", "torch": "bundled with torch"}
    where = bundled.get(str(tool.source), f"from {tool.source}")
    version = shown(tool.version) if tool.version else "of unknown release"
    return f"ptxas {version} ({tool.path}, {where})"


def toolkit_ptxas(facts: Facts) -> tuple[str, tuple[int, int]] | None:
    path, version = facts.get("compile.toolkit_ptxas_path"), version_of(facts.get("compile.toolkit_ptxas_version"))
    return (str(path), version) if path and version else None


def ptxas_inputs(facts: Facts, out: str) -> list[tuple[str, tuple[int, int], Tool]] | None:
    """(label, capability, tool) for every GPU; None (``out`` unknown) when an input is missing."""
    if not need(facts, out, "compile.ptxas_path", "compile.ptxas_split"):
        return None
    gpus = gpu_capabilities(facts, out)
    if gpus is None:
        return None
    return [(label, cc, tool_for(facts, cc)) for _, label, cc in gpus]


def _ptxas_arch(facts: Facts) -> None:
    out = OUT + "ptxas_too_old"
    names = (OUT + "ptxas_targets", OUT + "ptxas_arch_command")
    inputs = ptxas_inputs(facts, out)
    if inputs is None:
        facts.mark_all_unknown(names, facts.unknown_reason(out))
        return
    table = arch_table()
    targets: list[str] = []
    too_old: list[str] = []
    fixes: dict[str, tuple[int, int]] = {}
    for label, cc, tool in inputs:
        arch = table.get(cc)
        if arch is None:
            reason = f"{label} has compute capability {shown(cc)}, which rules/data/ptxas.toml does not list"
            facts.mark_all_unknown((out, *names), reason)
            return
        if tool.version is None:
            too_old.append(f"{label} needs {arch.target}, and no ptxas runs: {tool.error or 'none found'}")
        elif tool.version < arch.cuda:
            known = f"known from CUDA {shown(arch.cuda)}"
            too_old.append(f"{label} needs {arch.target}, {known}; Triton runs {described(tool)}")
        else:
            targets.append(f"{label}: {arch.target} with {described(tool)}")
            continue
        fixes.setdefault(tool.env, arch.cuda)
        fixes[tool.env] = max(fixes[tool.env], arch.cuda)
    facts.set(out, too_old)
    facts.set(OUT + "ptxas_targets", targets)
    if too_old:
        _ptxas_fix(facts, OUT + "ptxas_arch_command", fixes)


def _ptxas_fix(
    facts: Facts, out: str, wanted: dict[str, tuple[int, int]], newest: tuple[int, int] | None = None
) -> None:
    """``export VAR=<the toolkit's ptxas>`` where that ptxas is at least each wanted release (and,
    given ``newest``, no newer than it)."""
    found = toolkit_ptxas(facts)
    need_at_least = max(wanted.values())
    if found is None or found[1] < need_at_least or (newest is not None and found[1][0] > newest[0]):
        have = f"the CUDA toolkit here has ptxas {shown(found[1])}" if found else "no CUDA toolkit ptxas was found"
        within = f", of CUDA {newest[0]} at most," if newest is not None else ""
        facts.mark_unknown(out, f"{have}; a ptxas of CUDA {shown(need_at_least)} or newer{within} is needed")
        return
    facts.set(out, joined(["export", *[f"{env}={found[0]}" for env in sorted(wanted)]]))


def _ptxas_driver(facts: Facts) -> None:
    out = OUT + "ptxas_driver_state"
    names = (OUT + "ptxas_driver_detail", OUT + "ptxas_driver_command", OUT + "driver_cuda")
    inputs = ptxas_inputs(facts, out)
    if inputs is None or not need(facts, out, "driver.cuda_version"):
        facts.mark_all_unknown(names, facts.unknown_reason(out))
        return
    driver = version_of(facts.get("driver.cuda_version"))
    if driver is None:
        why = f"cannot read the driver's CUDA version {facts.get('driver.cuda_version')!r}"
        facts.mark_all_unknown((out, *names), why)
        return
    facts.set(OUT + "driver_cuda", shown(driver))
    used = {tool.path: tool for _, _, tool in inputs} if inputs else {None: tool_for(facts, (0, 0))}
    tools = [tool for tool in used.values() if tool.version is not None]
    newer = [tool for tool in tools if tool.version is not None and tool.version > driver]
    if not newer:
        facts.set(out, "ok")
        return
    major = any(tool.version is not None and tool.version[0] > driver[0] for tool in newer)
    facts.set(out, "newer_major" if major else "newer_minor")
    facts.set(OUT + "ptxas_driver_detail", "; ".join(described(tool) for tool in newer))
    if not major:
        return
    table = arch_table()
    wanted = {tool.env: (0, 0) for tool in newer}
    for _, cc, tool in inputs:
        if tool.env in wanted and cc in table:
            wanted[tool.env] = max(wanted[tool.env], table[cc].cuda)
    _ptxas_fix(facts, OUT + "ptxas_driver_command", wanted, newest=driver)


# -- caches -----------------------------------------------------------------------------------------------
CACHE_NAMES = {"triton_cache": "Triton's cache", "inductor_cache": "Inductor's cache"}
CACHE_VARIABLES = {"triton_cache": "TRITON_CACHE_DIR", "inductor_cache": "TORCHINDUCTOR_CACHE_DIR"}


def cache_problem(facts: Facts, cache: str) -> tuple[str | None, str | None] | None:
    """(why the cache is unusable, why it is on a network file system); None when unknown."""
    prefix = f"compile.{cache}."
    if not facts.has(prefix + "writable"):
        return None
    path, existing = facts.get(prefix + "path"), facts.get(prefix + "existing")
    at = f"{CACHE_NAMES[cache]} {path}"
    mount = f"{facts.get(prefix + 'mount_point')} ({facts.get(prefix + 'fstype')})"
    unusable = None
    if facts.get(prefix + "readonly") is True:
        unusable = f"{at}: {mount} is mounted read-only"
    elif facts.get(prefix + "noexec") is True:
        unusable = f"{at}: {mount} is mounted noexec, so what Triton builds there cannot be loaded"
    elif facts.get(prefix + "writable") is False:
        unusable = f"{at}: this user cannot create files in {existing}"
    network = f"{at} is on {mount}, a network file system" if facts.get(prefix + "network") is True else None
    return unusable, network


def _caches(facts: Facts) -> None:
    problems: dict[str, tuple[str | None, str | None]] = {}
    for cache in CACHE_NAMES:
        found = cache_problem(facts, cache)
        if found is None:
            reason = facts.unknown_reason(f"compile.{cache}.writable")
            names = ("cache_unusable", "cache_network", "cache_places", "cache_command", "cache_network_command")
            facts.mark_all_unknown([OUT + name for name in names], reason)
            return
        problems[cache] = found
    unusable = [problem[0] for problem in problems.values() if problem[0]]
    network = [problem[1] for problem in problems.values() if problem[1]]
    facts.set(OUT + "cache_unusable", unusable)
    facts.set(OUT + "cache_network", network)
    facts.set(OUT + "cache_places", [str(facts.get(f"compile.{cache}.path")) for cache in CACHE_NAMES])
    if unusable:
        _cache_fix(facts, OUT + "cache_command", [c for c, p in problems.items() if p[0]])
    if network:
        _cache_fix(facts, OUT + "cache_network_command", [c for c, p in problems.items() if p[1]])


def _cache_fix(facts: Facts, out: str, caches: list[str]) -> None:
    base = facts.get("compile.local_cache_base")
    if not isinstance(base, str) or not base:
        why = facts.reason("compile.local_cache_base") or "no local folder this user can write and run files from"
        facts.mark_unknown(out, why + " (looked at the temporary folder, /var/tmp and the home folder)")
        return
    user = facts.get("compile.user")
    folders = {"triton_cache": "triton-cache", "inductor_cache": f"torchinductor_{user}" if user else "torchinductor"}
    words = [f"{CACHE_VARIABLES[cache]}={os.path.join(base, folders[cache])}" for cache in caches]
    facts.set(out, joined(["export", *words]))

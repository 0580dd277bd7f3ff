"""What the library derivers share: torch's pins, the CUDA-library table, and the commands they
print (runnable as printed: paths quoted, the target interpreter's own pip)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from typing import Any, NamedTuple

# at the top: a full check imports the derivers while its probes wait (pipeline.import_derivers)
from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from cuda_doctor.base.childside.packages import normalize
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.fixes import pip_of
from cuda_doctor.tables import load_table
from cuda_doctor.tables.versions import release_of
from cuda_doctor.tables.wheels import index_url, releases, variant_of


class Pin(NamedTuple):
    name: str  # normalized distribution name
    specifier: str  # "==2.28.9", "==13.0.96.*", ">=13.1.0.3,<=13.1.1.3"
    requirement: str  # what pip is given: "nvidia-nccl-cu13==2.28.9", "cuda-toolkit[cublas,cudart]==13.0.2"
    via: str  # "torch", or "cuda-toolkit" for what torch pins through the toolkit's extras


def missing(facts: Facts, name: str, *outs: str) -> bool:
    """True when input ``name`` is not known; its reason, if it has one, becomes that of ``outs``."""
    if facts.has(name):
        return False
    reason = facts.reason(name)
    if reason:
        facts.mark_all_unknown(outs, reason)
    return True


def marker_environment(facts: Facts) -> dict[str, str]:
    """PEP 508 marker values for the target interpreter: this machine's, with its Python."""
    env: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
    python = facts.get("framework.python_version")
    if isinstance(python, str) and python.count(".") >= 1:
        env["python_full_version"] = python
        env["python_version"] = ".".join(python.split(".")[:2])
    return env


def torch_pins(facts: Facts) -> dict[str, Pin]:
    """The CUDA distributions torch pins itself (those win) or through the cuda-toolkit extras it asks for."""
    env = marker_environment(facts)
    pins: dict[str, Pin] = {}
    extras: set[str] = set()
    for req in requirements(facts.get("torch.requires")):
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = normalize(req.name)
        if name == "cuda-toolkit":
            extras = set(req.extras)
        shown = f"{req.name}[{','.join(sorted(req.extras))}]" if req.extras else req.name
        pins[name] = Pin(name, str(req.specifier), f"{shown}{req.specifier}", "torch")
    for req in requirements(facts.get("framework.cuda_toolkit_requires")):
        if req.marker is None or not any(req.marker.evaluate({**env, "extra": extra}) for extra in extras):
            continue  # only what the extras torch asks for pull in
        name = normalize(req.name)
        if name not in pins:
            pins[name] = Pin(name, str(req.specifier), f"{req.name}{req.specifier}", "cuda-toolkit")
    return pins


def requirements(lines: Any) -> Iterator[Requirement]:
    """The PEP 508 requirements of a fact's list of lines; a line that is not one is left out."""
    for line in lines or []:
        try:
            yield Requirement(str(line))
        except InvalidRequirement:
            continue


def library_pin(pins: dict[str, Pin], key: str | None) -> Pin | None:
    """torch's pin on the distribution that ships CUDA library ``key``."""
    row = library_row(key) if key else None
    return next((pins[name] for name in (row or {}).get("distributions", []) if name in pins), None)


def satisfies(version: object, specifier: str) -> bool | None:
    """Whether a version meets a specifier; None when either cannot be read."""
    try:
        return SpecifierSet(specifier).contains(Version(str(version)), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def pinned_version(specifier: str) -> str | None:
    """The version an exact pin names ("==2.28.9" → 2.28.9, "==13.0.96.*" → 13.0.96)."""
    match = re.fullmatch(r"===?\s*([0-9][0-9.]*?)(\.\*)?", specifier.strip())
    return match.group(1) if match else None


def compare_versions(have: object, want: object) -> str:
    """'same', 'older', 'newer', 'major_differs' (on the parts both versions have) or 'unknown'."""
    a, b = _numbers(have), _numbers(want)
    if not a or not b:
        return "unknown"
    if a[0] != b[0]:
        return "major_differs"
    n = min(len(a), len(b))
    return "same" if a[:n] == b[:n] else "older" if a[:n] < b[:n] else "newer"


def _numbers(text: object) -> tuple[int, ...]:
    match = re.match(r"^\s*(\d+(?:\.\d+)*)", str(text)) if text is not None else None
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def library_row(key: str) -> dict[str, Any] | None:
    """The table row of a loaded library (``cudnn`` also answers for ``cudnn_graph`` and co.)."""
    for row in load_table("cuda_libraries")["library"]:
        if row["key"] == key or (row.get("prefix") and key.startswith(row["key"] + "_")):
            return dict(row)
    return None


def family(name: str) -> str | None:
    """The CUDA family of an nvidia-* distribution: its -cuNN suffix, or the table's list."""
    match = re.search(r"-cu(\d+)$", name)
    if match:
        return f"cu{match.group(1)}"
    rows = load_table("cuda_libraries").get("family", [])
    return next((str(row["name"]) for row in rows if name in row["distributions"]), None)


def pip_install(facts: Facts, *requirements: str, options: str = "") -> str:
    # quoted always, as pip's own docs write them: '>=', '[extras]' and '*' mean something to a shell
    quoted = " ".join(f"'{r}'" if "'" not in r else shlex.quote(r) for r in requirements)
    return f"{pip_of(facts)} install {options + ' ' if options else ''}{quoted}"


def path_entries(value: object) -> list[str]:
    return [entry for entry in str(value).split(os.pathsep) if entry] if value else []


def same_path(a: str, b: str) -> bool:
    """The same folder, as written or once symlinks are resolved (/usr/local/cuda → cuda-12.4)."""
    return os.path.normpath(a) == os.path.normpath(b) or os.path.realpath(a) == os.path.realpath(b)


def without_entry(variable: str, value: object, entry: str) -> str:
    """The command that drops ``entry`` from a path variable (``unset`` when nothing is left)."""
    kept = [e for e in path_entries(value) if not same_path(e, entry)]
    if not kept:
        return f"unset {variable}"
    return f"export {variable}={shlex.quote(os.pathsep.join(kept))}"


def in_variable(value: object, folder: str) -> bool:
    return any(same_path(entry, folder) for entry in path_entries(value))


def torch_version(facts: Facts) -> str | None:
    """torch's version as installed (read even when ``import torch`` fails), else its ``__version__``."""
    for index in facts.indices("dist"):
        if facts.get(f"dist[{index}].name") == "torch":
            return str(facts.get(f"dist[{index}].version"))
    version = facts.get("torch.version")
    return str(version) if version else None


def torch_variant(facts: Facts) -> str | None:
    """The wheel variant of the installed torch: "cpu", "cu126", …; None when not known."""
    if facts.has("torch.cuda_build"):
        build = facts.get("torch.cuda_build")
        if build is None:
            return None if facts.get("torch.hip_build") else "cpu"
        return variant_of(build)
    local = (torch_version(facts) or "").partition("+")[2]
    return local if re.fullmatch(r"cpu|cu\d+", local) else None


def index_option(facts: Facts) -> str | None:
    """``--index-url …`` for wheels built like the installed torch ("" for PyPI's); None if unknown."""
    variant = torch_variant(facts)
    version = torch_version(facts)
    if version is None:
        return None
    if variant is None:
        # torch not imported: PyPI's wheels carry no local label, the PyTorch index's do (+cu126)
        return "" if "+" not in version and not facts.has("torch.cuda_build") else None
    if variant == "cpu":
        return f"--index-url {index_url(variant)}"
    release = release_of(version)
    row = next((r for r in releases() if str(r["torch"]) == release), None)
    if row is None or variant not in row["variants"]:  # type: ignore[operator]
        return None
    return "" if variant == variant_of(row.get("pypi_default")) else f"--index-url {index_url(variant)}"

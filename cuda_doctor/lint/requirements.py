"""torch pins in requirements files, pyproject.toml and ``pip install`` command lines, checked against
``rules/data/torch_wheels.toml``: a CUDA variant is a local version (``torch==2.3.0+cu121``) or an index URL.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from cuda_doctor.base.tomlcompat import tomllib
from cuda_doctor.lint.findings import Hit
from cuda_doctor.tables import load_table
from cuda_doctor.tables.versions import release_of
from cuda_doctor.tables.wheels import variant_cuda

INDEX_VARIANT = re.compile(
    r"download\.pytorch\.org/whl/(?P<nightly>nightly/|test/)?(?P<variant>cu\d{2,3}|cpu|rocm[\d.]+|xpu)"
    r"(?:[/?#]|$|\s)"
)
WHEEL_URL = re.compile(r"/torch-(?P<version>\d+\.\d+(?:\.\d+)?)(?:%2B|\+)(?P<variant>cu\d{2,3}|cpu)")
LOCAL_VARIANT = re.compile(r"^(cu\d{2,3}|cpu|rocm[\d.]+|xpu)$")
# Variants of releases older than the table (1.13) cannot be judged; from cu116 on they can.
TABLE_FLOOR = (11, 6)
OPTION_WITH_URL = ("--index-url", "-i", "--extra-index-url", "-f", "--find-links")
URL_OPTION = re.compile("(?:" + "|".join(map(re.escape, OPTION_WITH_URL)) + ")[= \t]")  # ``-f=URL``, ``-i URL``
REQUIREMENT_FILE_OPTIONS = ("-r", "--requirement", "-c", "--constraint")
VALUE_OPTIONS = frozenset({*OPTION_WITH_URL, *REQUIREMENT_FILE_OPTIONS})
PIP_INSTALL = re.compile(r"\bpip3?(?:\.\d+)?\s+install\b|\b-m\s+pip\s+install\b|\buv\s+pip\s+install\b")
FRAMEWORK_NAMES = {
    "torch": frozenset({"torch"}),
    "tensorflow": frozenset({"tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-macos"}),
    "jax": frozenset({"jax"}),
    "deepspeed": frozenset({"deepspeed"}),
}


@dataclass(frozen=True)
class TorchPin:
    """One way a file asks for a torch build."""

    line: int
    column: int
    text: str  # as written, for the message
    version: str | None  # "2.3.0" (the release asked for, if pinned to one)
    variant: str | None  # "cu121", "cpu" …
    via: str  # "local version" | "index URL" | "wheel URL"
    # an index URL says only the variant: the release of a torch pin of the file (or project) picks a suggestion
    release_hint: str | None = None
    hint_from: str | None = None  # the pin that gave release_hint, as written


@functools.lru_cache(maxsize=1)
def torch_table() -> dict[str, dict[str, Any]]:
    """torch release ("2.6") → its row of torch_wheels.toml."""
    return {str(row["torch"]): row for row in load_table("torch_wheels").get("release", [])}


def wheel_cuda(pin: TorchPin) -> str | None:
    """The CUDA version ("12.1") the pinned wheel is built for, when the pin says or implies it."""
    if pin.variant:
        cuda = variant_cuda(pin.variant)
        return f"{cuda[0]}.{cuda[1]}" if cuda else None
    row = torch_table().get(release_of(pin.version) or "")
    default = row.get("pypi_default") if row else None
    return str(default) if default else None


def check_pin(pin: TorchPin) -> Hit | None:
    """CDL201 when no torch release (or not the pinned one) ships the asked-for CUDA variant."""
    if pin.via == "index" or not pin.variant or not pin.variant.startswith("cu"):
        return None  # a requirement that takes its variant from the file's index URL: that URL is checked
    cuda = variant_cuda(pin.variant)
    if cuda is None:
        return None
    table = torch_table()
    release = release_of(pin.version or pin.release_hint)
    row = table.get(release or "")
    if row is not None:
        shipped = list(row.get("variants", []))
        if pin.variant in shipped or row.get("complete") is False:  # an incomplete list proves no absence
            return None
        problem = f"torch {release} has no {pin.variant} wheels (it ships {', '.join(shipped)})"
        suggestion = _nearest(pin.variant, shipped)
        if pin.version:
            fix = f"use `torch=={pin.version}+{suggestion}` from https://download.pytorch.org/whl/{suggestion}"
        else:
            problem = f"{problem}; torch is pinned by `{pin.hint_from}`"
            ordered = sorted(shipped, key=lambda v: v != suggestion)
            fix = f"use an index of a variant torch {release} ships: " + " or ".join(
                f"https://download.pytorch.org/whl/{v}" for v in ordered
            )
    else:
        every = sorted(
            {v for r in table.values() for v in r.get("variants", [])}, key=lambda v: variant_cuda(v) or (0, 0)
        )
        if pin.variant in every or cuda < TABLE_FLOOR:
            return None
        problem = f"no torch release ships {pin.variant} wheels (there never was one)"
        suggestion = _nearest(pin.variant, every)
        fix = (
            f"use a variant that exists, e.g. {suggestion} "
            f"(https://download.pytorch.org/whl/{suggestion}); variants: {', '.join(every)}"
        )
    return Hit.make("CDL201", pin.line, pin.column, spec=pin.text, problem=problem, fix=fix, via=pin.via)


def attach_release(pins: list[TorchPin], fallback: tuple[str, str] | None = None) -> list[TorchPin]:
    """Give index-URL pins the release a torch pin of the same file (else ``fallback``:
    (version, as written), the project's pin) asks for."""
    pinned = next((p for p in pins if p.version), None)
    hint = (pinned.version, pinned.text) if pinned and pinned.version else fallback
    if hint is None:
        return pins
    return [
        replace(p, release_hint=hint[0], hint_from=hint[1]) if p.via == "index URL" and not p.version else p
        for p in pins
    ]


def _nearest(variant: str, choices: list[str]) -> str:
    """The choice closest in CUDA version (an older one on a tie: it needs an older driver)."""
    want = variant_cuda(variant) or (0, 0)

    def distance(choice: str) -> tuple[int, int]:
        major, minor = variant_cuda(choice) or (0, 0)
        gap = abs((major * 10 + minor) - (want[0] * 10 + want[1]))
        return gap, major * 10 + minor

    return min(choices, key=distance)


def index_variant(url: str) -> str | None:
    match = INDEX_VARIANT.search(url + " ")
    if match is None or match.group("nightly"):
        return None  # nightly/test indexes carry variants of their own
    return match.group("variant")


def parse_requirement(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def pin_from_requirement(text: str, line: int, column: int, index_variants: Iterable[str]) -> TorchPin | None:
    """A torch requirement (PEP 508) → the pin it makes, or None when it is not torch."""
    req = parse_requirement(text)
    if req is None or req.name.lower() != "torch":
        return None
    version: str | None = None
    variant: str | None = None
    via = "local version"
    if req.url:
        match = WHEEL_URL.search(req.url)
        if match:
            version, variant, via = match.group("version"), match.group("variant"), "wheel URL"
        else:
            variant, via = index_variant(req.url), "index URL"
    for spec in req.specifier:
        if spec.operator in ("==", "===") and "*" not in spec.version:
            version, _, local = spec.version.partition("+")
            if local and LOCAL_VARIANT.match(local):
                variant = local
        elif spec.operator == "==" and spec.version.endswith(".*"):
            version = spec.version[:-2]
        elif spec.operator == "~=":
            version = spec.version
    if variant is None and (variant := next(iter(index_variants), None)) is not None:
        via = "index"  # the file's index URL, reported on its own line
    if variant is None and version is None:
        return None
    return TorchPin(line, column, text.strip(), version, variant, via)


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first physical line number, text) with ``\\`` continuations joined, comments removed."""
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not buffer:
            start = number
        line = "" if raw.lstrip().startswith("#") else raw.split(" #", 1)[0]
        if line.endswith("\\"):
            buffer.append(line[:-1])
            continue
        buffer.append(line)
        yield start, " ".join(buffer).strip()
        buffer = []
    if buffer:
        yield start, " ".join(buffer).strip()


def collect_pins(indexes: Iterable[tuple[int, str]], requirements: Iterable[tuple[int, str]]) -> list[TorchPin]:
    """The pins of index URLs and of requirements ((line, text) each) read with those indexes."""
    pins = [TorchPin(line, 1, url, None, v, "index URL") for line, url in indexes if (v := index_variant(url))]
    variants = [str(pin.variant) for pin in pins]
    found = (pin_from_requirement(text, line, 1, variants) for line, text in requirements)
    return attach_release(pins + [pin for pin in found if pin is not None])


def requirements_pins(text: str) -> list[TorchPin]:
    indexes: list[tuple[int, str]] = []
    entries: list[tuple[int, str]] = []
    for number, line in logical_lines(text):
        if URL_OPTION.match(line):
            indexes.append((number, line))  # the pin is the whole line
        elif line and not line.startswith("-"):
            entries.append((number, line))
    return collect_pins(indexes, entries)


def lint_requirements(text: str, project_pin: tuple[str, str] | None = None) -> list[Hit]:
    """``project_pin``: (version, as written) of a torch release pinned elsewhere in the project."""
    return _dedupe(map(check_pin, attach_release(requirements_pins(text), project_pin)))


def lint_pyproject(text: str, project_pin: tuple[str, str] | None = None) -> list[Hit]:
    return _dedupe(map(check_pin, attach_release(pyproject_pins(text), project_pin)))


def _dedupe(hits: Iterable[Hit | None]) -> list[Hit]:
    """The first hit of each line and spec."""
    out: dict[tuple[int, str], Hit] = {}
    for hit in hits:
        if hit is not None:
            out.setdefault((hit.line, hit.capture_dict().get("spec", "")), hit)
    return list(out.values())


def _line_of(text: str, needle: str) -> int:
    index = text.find(needle)
    return text.count("\n", 0, index) + 1 if index >= 0 else 1


def pyproject_pins(text: str) -> list[TorchPin]:
    """Raises tomllib.TOMLDecodeError for the engine to report."""
    data = tomllib.loads(text)
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    urls: list[str] = []
    for name, key in (("uv", "index"), ("poetry", "source"), ("pdm", "source")):
        table = tool.get(name, {}).get(key, [])
        if isinstance(table, list):
            urls.extend(str(entry.get("url", "")) for entry in table if isinstance(entry, dict))
    requirements = [(_line_of(text, r.split(";")[0].strip()), r) for r in _pyproject_requirements(data)]
    return collect_pins([(_line_of(text, url), url) for url in urls], requirements)


def _pyproject_requirements(data: dict[str, Any]) -> list[str]:
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    requirements = _strings(project.get("dependencies", []))
    for group in (project.get("optional-dependencies", {}), data.get("dependency-groups", {})):
        if isinstance(group, dict):
            for entries in group.values():
                requirements += _strings(entries)
    poetry_torch = tool.get("poetry", {}).get("dependencies", {}).get("torch")
    if isinstance(poetry_torch, dict):
        poetry_torch = poetry_torch.get("version")
    if isinstance(poetry_torch, str):
        spec = poetry_torch.strip()
        requirements.append(f"torch=={spec}" if spec[:1].isdigit() else f"torch{spec}")  # poetry's "2.1.0": exact
    return requirements


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


@dataclass(frozen=True)
class PipInstall:
    pins: tuple[TorchPin, ...]
    requirement_files: tuple[str, ...]


def pip_installs(command: str, line: int) -> list[PipInstall]:
    """Every ``pip install`` in a shell command line, with its torch pins and ``-r`` files."""
    out: list[PipInstall] = []
    for segment in re.split(r"&&|\|\||;|\|", command):
        match = PIP_INSTALL.search(segment)
        if match is None:
            continue
        try:
            words = shlex.split(segment[match.end() :], comments=True)
        except ValueError:
            words = segment[match.end() :].split()
        out.append(_parse_pip_words(words, line))
    return out


def _parse_pip_words(words: list[str], line: int) -> PipInstall:
    urls: list[str] = []
    requirement_files: list[str] = []
    candidates: list[tuple[int, str]] = []
    rest = iter(words)
    for word in rest:
        option, equals, value = word.partition("=")  # a long option may be joined to its value
        if word in VALUE_OPTIONS:
            following = next(rest, None)
            if following is None:
                continue  # an option at the very end has no value
            option, value = word, following
        elif not (equals and option.startswith("--") and option in VALUE_OPTIONS):
            if not word.startswith("-"):
                candidates.append((line, word))
            continue
        (requirement_files if option in REQUIREMENT_FILE_OPTIONS else urls).append(value)
    pins = collect_pins([(line, url) for url in urls], candidates)
    return PipInstall(tuple(pins), tuple(requirement_files))


def lint_command(command: str, line: int) -> list[Hit]:
    return _dedupe(check_pin(pin) for inst in pip_installs(command, line) for pin in inst.pins)


def framework_requirements(text: str, kind: str, framework: str) -> list[Requirement]:
    """The requirements of one framework in a requirements file or pyproject.toml (``kind``); never raises."""
    if kind == "pyproject":
        try:
            lines = _pyproject_requirements(tomllib.loads(text))
        except tomllib.TOMLDecodeError:
            return []  # reported as CDL000 when the file itself is linted
    else:
        lines = [line for _, line in logical_lines(text) if line and not line.startswith("-")]
    names = FRAMEWORK_NAMES[framework]
    mentioned = (parse_requirement(line) for line in lines if any(name in line.lower() for name in names))
    return [req for req in mentioned if req is not None and req.name.lower() in names]


def caps_below(req: Requirement, bound: Version) -> bool:
    """True when the requirement allows no release at or above ``bound``."""
    return any(_spec_caps(spec.operator, spec.version, bound) for spec in req.specifier)


def _spec_caps(operator: str, version: str, bound: Version) -> bool:
    try:
        if operator == "~=":  # ~=2.3.1 means >=2.3.1, ==2.3.*
            operator, version = "==", ".".join(map(str, Version(version).release[:-1])) + ".*"
        if operator in ("==", "===") and version.endswith(".*"):
            parts = [int(x) for x in version[:-2].split(".")]
            parts[-1] += 1  # ==2.3.* allows everything below 2.4
            return Version(".".join(map(str, parts))) <= bound
        if operator in ("==", "==="):
            return Version(version.partition("+")[0]) < bound
        if operator == "<":
            return Version(version) <= bound
        if operator == "<=":
            return Version(version) < bound
    except (InvalidVersion, ValueError, IndexError):
        return False
    return False

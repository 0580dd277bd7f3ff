"""The nvidia/cuda tag catalogue (``rules/data/nvidia_cuda_tags.toml``): ``judge`` says what became of a
tag; ``suggest`` names the nearest supported one, from verified rows only, so every tag printed exists."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

TABLE = "nvidia_cuda_tags"
DEFAULT_FLAVOUR = "runtime"
_OS = re.compile(r"^(?P<name>[a-z]+)(?P<version>[0-9.]*)$")
#: Where an OS has no image at the version a suggestion lands on, its successors come next.
_OS_SUCCESSORS = {"centos": ("rockylinux", "ubi"), "cm": ("azl",), "oraclelinux": ("rockylinux",)}

Version = tuple[int, ...]


class CatalogueError(Exception):
    """The catalogue file is missing or cannot be read (the message says which and why)."""


@dataclass(frozen=True)
class CudaTag:
    """One tag, split: ``12.4.1`` / ``cudnn-devel`` / ``ubuntu22.04``."""

    text: str
    version: str
    flavour: str
    os: str | None

    @property
    def numbers(self) -> Version:
        return tuple(int(p) for p in self.version.split("."))

    @property
    def short(self) -> bool:
        """The old MAJOR.MINOR form (``10.2-devel``), used up to CUDA 11.0."""
        return len(self.numbers) == 2

    @property
    def kind(self) -> str:
        return self.flavour.rsplit("-", 1)[-1]  # base | runtime | devel

    @property
    def prefix(self) -> str:
        """``cudnn8`` / ``cudnn`` / ``tensorrt`` / ``""``."""
        return self.flavour.rsplit("-", 1)[0] if "-" in self.flavour else ""


@dataclass
class Catalogue:
    as_of: str
    tag_format: str
    default_os: str
    removed_aliases: tuple[str, ...]
    regex: re.Pattern[str]
    state: dict[str, str] = field(default_factory=dict)  # tag → supported | unsupported | removed
    unverified: frozenset[str] = frozenset()
    removed_on: dict[str, str] = field(default_factory=dict)  # CUDA version → last removal date
    #: supported tags only: version → flavour → OSes (what suggestions are made of)
    supported: dict[Version, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    listed_versions: frozenset[Version] = frozenset()
    doubtful_versions: frozenset[Version] = frozenset()  # rows marked verified = false
    newest_minor: dict[int, tuple[int, int]] = field(default_factory=dict)  # major → its newest minor
    ngc_pytorch: dict[str, dict[str, Any]] = field(default_factory=dict)

    def parse(self, text: str) -> CudaTag | None:
        match = self.regex.match(text)
        if match is None:
            return None
        return CudaTag(text, match.group("version"), match.group("flavour"), match.group("os"))


@functools.cache
def catalogue() -> Catalogue:
    """The parsed catalogue; raises ``CatalogueError`` with the reason when it cannot be read."""
    from cuda_doctor.tables import load_table, table_path

    try:
        return _build(load_table(TABLE))
    except FileNotFoundError:
        raise CatalogueError(f"{table_path(TABLE)} is missing") from None
    except (OSError, ValueError, KeyError, TypeError, re.error) as exc:  # TOMLDecodeError is a ValueError
        raise CatalogueError(f"{table_path(TABLE)} cannot be read: {exc}") from None


def _build(data: dict[str, Any]) -> Catalogue:
    cat = Catalogue(
        as_of=str(data["as_of"]),
        tag_format=str(data.get("tag_format", "")),
        default_os=str(data.get("default_os", "ubuntu22.04")),
        removed_aliases=tuple(str(t) for t in data.get("removed_tags", [])),
        regex=re.compile(str(data["tag_regex"])),
    )
    listed: set[Version] = set()
    unverified: set[str] = {str(t) for row in data.get("unverified", []) for t in row.get("tags", [])}
    doubtful: set[Version] = set()
    for row in data.get("version", []):
        cuda = str(row["cuda"])
        numbers = tuple(int(p) for p in cuda.split("."))
        tags = {
            f"{cuda}-{flavour}-{os_name}": state
            for state in ("supported", "unsupported", "removed")
            for flavour, systems in row.get(state, {}).items()
            for os_name in systems
        }
        if row.get("verified") is not True:
            # seen, not settled: never an error or a suggestion, nor proof that other tags never existed
            doubtful.add(numbers)
            unverified.update(tags)
            continue
        listed.add(numbers)
        cat.state.update(tags)
        if len(numbers) == 3:
            minor = (numbers[0], numbers[1])
            cat.newest_minor[minor[0]] = max(cat.newest_minor.get(minor[0], minor), minor)
            for flavour, systems in row.get("supported", {}).items():
                cat.supported.setdefault(numbers, {})[str(flavour)] = tuple(sorted(systems))
        for tag in (*row.get("removed_no_os", []), *row.get("removed_rc", [])):
            cat.state[str(tag)] = "removed"
        if row.get("removed_from_docs_on"):
            cat.removed_on[cuda] = str(max(row["removed_from_docs_on"]))
    cat.listed_versions = frozenset(listed)
    cat.unverified = frozenset(unverified)
    cat.doubtful_versions = frozenset(doubtful)
    cat.ngc_pytorch = {str(r["release"]): dict(r) for r in data.get("ngc_pytorch", []) if "release" in r}
    return cat


@dataclass(frozen=True)
class Verdict:
    """What became of one tag; ``certain``: the catalogue is verified for it (a finding may be an error)."""

    tag: str | None
    state: str  # supported | unsupported (still pullable) | removed | nonexistent | unlisted | unverified
    certain: bool
    reason: str
    superseded: bool = False  # unsupported, and a newer patch of the same minor is supported


def judge(tag: str | None) -> Verdict:
    cat = catalogue()
    if tag is None:
        return Verdict(None, "removed", True, "no tag: Docker pulls `latest`, which NVIDIA removed")
    if tag in cat.removed_aliases:
        return Verdict(tag, "removed", True, f"`{tag}` was removed from Docker Hub and NGC")
    state = cat.state.get(tag)
    parsed = cat.parse(tag)
    if state is not None:
        return _listed(cat, tag, state, parsed)
    if tag in cat.unverified:
        why = f"`{tag}` is in use elsewhere but not in NVIDIA's lists of {cat.as_of}"
        return Verdict(tag, "unverified", False, why)
    if parsed is None:
        return Verdict(tag, "nonexistent", True, f"`{tag}` is not a tag NVIDIA publishes (format: {cat.tag_format})")
    if parsed.short and parsed.numbers > (11, 0):
        why = f"`{tag}` never existed: short tags (MAJOR.MINOR) were used only up to CUDA 11.0"
        return Verdict(tag, "nonexistent", True, why)
    if _covered(cat, parsed.numbers) and parsed.numbers not in cat.doubtful_versions:
        if parsed.numbers in cat.listed_versions:
            why = f"`{tag}` never existed: CUDA {parsed.version} images exist, but not with this flavour and OS"
        else:
            why = f"`{tag}` never existed: NVIDIA published no CUDA {parsed.version} image"
        return Verdict(tag, "nonexistent", True, why)
    why = f"`{tag}` is not in NVIDIA's tag lists of {cat.as_of} (cuda-doctor's catalogue); a newer release may have it"
    return Verdict(tag, "unlisted", False, why)


def _listed(cat: Catalogue, tag: str, state: str, parsed: CudaTag | None) -> Verdict:
    version = parsed.version if parsed else tag.split("-", 1)[0]
    if state == "supported":
        return Verdict(tag, state, True, f"`{tag}` is supported (NVIDIA's list of {cat.as_of})")
    if state == "removed":
        when = cat.removed_on.get(version)
        if parsed is None or parsed.short:
            why = f"`{tag}` was deleted: short tags (MAJOR.MINOR, up to CUDA 11.0) were all removed"
        else:
            why = f"`{tag}` was deleted from Docker Hub and NGC"
        return Verdict(tag, state, True, why + (f" (gone from NVIDIA's lists since {when})" if when else ""))
    patches = [v for v in cat.supported if parsed is not None and not parsed.short and v[:2] == parsed.numbers[:2]]
    newer = max(patches, default=None)
    if parsed is not None and newer is not None and newer != parsed.numbers:
        shown = ".".join(map(str, newer))
        why = (
            f"`{tag}` is an older patch of CUDA {parsed.numbers[0]}.{parsed.numbers[1]}: only {shown} gets "
            "updates; NVIDIA says of the others that they may contain critical vulnerabilities"
        )
        return Verdict(tag, state, True, why, superseded=True)
    why = (
        f"CUDA {version} images are end of life: the tag still exists, unsupported, "
        "and may contain critical vulnerabilities"
    )
    return Verdict(tag, state, True, why)


def _covered(cat: Catalogue, numbers: Version) -> bool:
    """Whether an unlisted version never existed: its minor is older than its major's newest listed."""
    newest = cat.newest_minor.get(numbers[0])
    if newest is None:
        return bool(cat.newest_minor) and numbers[0] < min(cat.newest_minor)
    return (numbers[0], numbers[1]) < newest


def minor_of(text: object) -> tuple[int, int] | None:
    """``"12.6"`` / ``"12.6.3"`` / ``"cu126"`` → (12, 6); None when it is not a CUDA version."""
    from cuda_doctor.tables.versions import major_minor
    from cuda_doctor.tables.wheels import variant_cuda

    return None if text is None else variant_cuda(str(text).strip()) or major_minor(text)


def suggest(
    tag: str | None,
    *,
    cuda_minor: tuple[int, int] | None = None,
    ceiling: tuple[int, int] | None = None,
    flavour: str | None = None,
) -> str | None:
    """The nearest supported tag to ``tag`` (None: ``latest``), or None: only of ``cuda_minor`` (a pinned
    torch wheel's), the newest at or below ``ceiling`` (the driver's CUDA), ``flavour`` instead of the tag's."""
    cat = catalogue()
    parsed = cat.parse(tag) if tag else None
    want_flavour = flavour or (parsed.flavour if parsed else DEFAULT_FLAVOUR)
    want_os = parsed.os if parsed and parsed.os else cat.default_os
    candidates = {
        version: name
        for version, name in _releases_with(want_flavour).items()
        if (cuda_minor is None or version[:2] == cuda_minor) and (ceiling is None or version[:2] <= ceiling)
    }
    if not candidates:
        return None
    version = max(candidates) if ceiling is not None or parsed is None else _nearest(parsed.numbers, list(candidates))
    name = candidates[version]
    os_name = _pick_os(want_os, cat.supported[version][name], cat.default_os)
    return f"{'.'.join(map(str, version))}-{name}-{os_name}"


@functools.cache
def _releases_with(flavour: str) -> dict[Version, str]:
    """The supported releases that have ``flavour``, with its name there."""
    found = {v: _flavour_at(flavour, flavours) for v, flavours in catalogue().supported.items()}
    return {v: name for v, name in found.items() if name is not None}


def _flavour_at(wanted: str, flavours: dict[str, tuple[str, ...]]) -> str | None:
    """``wanted``'s name at a version (cuDNN tags are ``cudnn8-``, ``cudnn9-`` or ``cudnn-`` by version)."""
    if wanted in flavours:
        return wanted
    prefix, _, kind = wanted.rpartition("-")
    if not prefix.startswith("cudnn"):
        return None
    same = sorted(
        (f for f in flavours if f.endswith(f"-{kind}") and f.startswith("cudnn")),
        key=lambda f: int(f[5:].split("-")[0] or 99),
    )
    return same[-1] if same else None


def _nearest(wanted: Version, versions: list[Version]) -> Version:
    """Same minor (newest patch), else next up or newest below in the major, else next up or newest below."""
    padded = wanted + (0,) * (3 - len(wanted))
    same_minor = [v for v in versions if v[:2] == wanted[:2]]
    if same_minor:
        return max(same_minor)
    above = sorted(v for v in versions if v > padded)
    below = sorted((v for v in versions if v < padded), reverse=True)
    groups = ([v for v in above if v[0] == wanted[0]], [v for v in below if v[0] == wanted[0]], above, below)
    return next((group[0] for group in groups if group), max(versions))


@functools.lru_cache(maxsize=4096)
def _pick_os(wanted: str, available: tuple[str, ...], default: str) -> str:
    """The same OS, else a newer release, its successor (CentOS → Rocky), an older release, the default."""
    if wanted in available:
        return wanted
    for name, version, below in _os_preferences(wanted, default):
        picked = _same_distro(name, version, available, below=below)
        if picked:
            return picked
    return min(available)


def _os_preferences(wanted: str, default: str) -> list[tuple[str, Version, bool]]:
    out: list[tuple[str, Version, bool]] = []
    match = _OS.match(wanted)
    if match:
        name, version = match.group("name"), _os_version(match.group("version"))
        out.append((name, version, False))
        out += [(successor, version, False) for successor in _OS_SUCCESSORS.get(name, ())]
        out.append((name, version, True))
    fallback = _OS.match(default)
    if fallback:
        out.append((fallback.group("name"), _os_version(fallback.group("version")), True))
    return out


def _same_distro(name: str, version: Version, available: tuple[str, ...], *, below: bool) -> str | None:
    """The release of ``name`` next up from ``version``, else (with ``below``) the newest below it."""
    matches = ((_OS.match(os_name), os_name) for os_name in available)
    releases = [(_os_version(m.group("version")), os_name) for m, os_name in matches if m and m.group("name") == name]
    above = sorted(r for r in releases if r[0] >= version)
    if above:
        return above[0][1]
    return max(releases)[1] if releases and below else None


def _os_version(text: str) -> Version:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def ngc_pytorch_cuda(release: str) -> str | None:
    """The CUDA inside ``nvcr.io/nvidia/pytorch:<release>-py3``, from a verified row only."""
    row = catalogue().ngc_pytorch.get(release)
    if row is None or row.get("verified") is not True or not row.get("cuda"):
        return None
    return str(row["cuda"])

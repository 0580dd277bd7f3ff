"""Installed distributions as an interpreter resolves them, from the names of their
``*.dist-info`` / ``*.egg-info`` folders; their files are read only when asked for, within caps
(``ValueError`` past one, ``OSError`` when unreadable)."""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

METADATA_CAP = 1 << 20
RECORD_CAP = 32 << 20
SMALL_FILE_CAP = 64 << 10
_SEPARATORS = re.compile(r"[-_.]+")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class Installed(NamedTuple):
    name: str  # normalized (PEP 503): "nvidia-nccl-cu13"
    version: str
    location: str  # the sys.path entry that holds it
    metadata: str  # its *.dist-info or *.egg-info folder


def normalize(name: str) -> str:
    return _SEPARATORS.sub("-", name).lower()


def requirement_name(line: str) -> str | None:
    """The normalized name a ``Requires-Dist`` value is about (``"torch==2.11.0; …"`` → ``torch``)."""
    match = _REQUIREMENT_NAME.match(line)
    return normalize(match.group(1)) if match else None


def installed(paths: Iterable[str], wanted: Callable[[str], bool]) -> dict[str, list[Installed]]:
    """Every copy of the distributions ``wanted`` accepts, per name, in resolution order."""
    found: dict[str, list[Installed]] = {}
    for entry in paths:
        location = entry or "."  # "" on sys.path is the current folder
        try:
            names = sorted(os.listdir(location))
        except OSError:  # not a folder (a zip, a missing entry): no metadata folders to list
            continue
        for folder in names:
            parsed = _folder_name(folder)
            if parsed is None or not wanted(parsed[0]):
                continue
            name, version = parsed
            found.setdefault(name, []).append(Installed(name, version, entry, os.path.join(location, folder)))
    return found


def _folder_name(folder: str) -> tuple[str, str] | None:
    for suffix in (".dist-info", ".egg-info"):
        if folder.endswith(suffix):
            stem = folder[: -len(suffix)]
            name, _, rest = stem.partition("-")
            version = rest.split("-py", 1)[0] if suffix == ".egg-info" else rest
            return normalize(name), version
    return None


def metadata_field(metadata: str, field: str) -> list[str]:
    """Every value of one header field of ``METADATA`` (``PKG-INFO`` for an egg), e.g. Requires-Dist."""
    for filename in ("METADATA", "PKG-INFO"):
        path = os.path.join(metadata, filename)
        if os.path.isfile(path):
            text = read_capped(path, METADATA_CAP)
            break
    else:
        return []
    values: list[str] = []
    wanted = field.lower() + ":"
    current = ""
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        if line[:1] in (" ", "\t") and values and current == wanted:
            values[-1] += " " + line.strip()  # a folded continuation line
            continue
        current = line.split(":", 1)[0].lower() + ":"
        if current == wanted:
            values.append(line.split(":", 1)[1].strip())
    return values


def record_files(dist: Installed) -> list[str]:
    """The paths a distribution's ``RECORD`` lists, relative to its location."""
    path = os.path.join(dist.metadata, "RECORD")
    if not os.path.isfile(path):
        return []
    return [row[0] for row in csv.reader(io.StringIO(read_capped(path, RECORD_CAP))) if row]


def owners(candidates: Iterable[Installed], files: Iterable[str]) -> dict[str, Installed]:
    """The distribution whose ``RECORD`` lists each of ``files`` (real, absolute paths); the
    likeliest are read first, and reading stops once every file is owned."""
    wanted = {os.path.normpath(path) for path in files}
    found: dict[str, Installed] = {}
    homes = {}
    for dist in candidates:
        home = os.path.realpath(dist.location or ".")
        if any(path.startswith(home + os.sep) for path in wanted):
            homes[dist] = home
    for dist in sorted(homes, key=lambda d: _distance(d, homes[d], wanted)):
        left = wanted - set(found)
        if not left:
            break
        for relative in record_files(dist):
            if ".so" not in relative:  # owners are asked for shared objects only
                continue
            path = os.path.normpath(os.path.join(homes[dist], relative))
            if path in left and path not in found:
                found[path] = dist
    return found


def _distance(dist: Installed, home: str, wanted: set[str]) -> int:
    """0 when a wanted file's top folder is named like the distribution (``nvidia/nccl``), else 1."""
    for path in wanted:
        if path.startswith(home + os.sep):
            top = normalize(path[len(home) + 1 :].split(os.sep, 1)[0].split(".", 1)[0])
            if dist.name == top or dist.name.startswith(top + "-") or top.startswith(dist.name):
                return 0
    return 1


def build_files(dist: Installed, package: str) -> dict[str, str]:
    """What a companion package says about its own build, raw: ``<package>/version.py``,
    ``<package>/cpp_lib.json`` and the distribution's ``direct_url.json``."""
    base = os.path.join(dist.location or ".", package)
    folders = {"version.py": base, "cpp_lib.json": base, "direct_url.json": dist.metadata}
    paths = {name: os.path.join(folder, name) for name, folder in folders.items()}
    return {name: read_capped(path, SMALL_FILE_CAP) for name, path in paths.items() if os.path.isfile(path)}


def read_capped(path: str, cap: int) -> str:
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise ValueError(f"{path} is larger than {cap} bytes")
    return data.decode("utf-8", "replace")

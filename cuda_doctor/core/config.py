"""``[tool.cuda-doctor]`` configuration, from the nearest ``pyproject.toml`` or ``--config FILE`` (which
may hold the keys at its top level).  Every mistake is reported with the file and the field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from cuda_doctor.base import tomlcache
from cuda_doctor.base.errors import UserError
from cuda_doctor.base.reading import FileRefused

SEVERITY_CHOICES = ("error", "warning", "info", "off")
FAIL_ON_CHOICES = ("error", "warning", "info")


class ConfigError(UserError):
    """A configuration file that cannot be used; the message names the file and the field."""


class Config(NamedTuple):
    """Immutable; a NamedTuple because every command makes one at start-up."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severity: Mapping[str, str] = MappingProxyType({})
    rules_dirs: tuple[Path, ...] = ()
    fail_on: str | None = None
    source: Path | None = None
    #: A GPU with less of its memory free than this is nearly full (CD604); None: the rule's own default.
    gpu_min_free_percent: float | None = None

    def facts(self) -> dict[str, Any]:
        """The settings the rules read as facts (``config.*``): those configured."""
        if self.gpu_min_free_percent is None:
            return {}
        return {"config.gpu_min_free_percent": self.gpu_min_free_percent}


def find_pyproject(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(path: Path | None, cwd: Path) -> Config:
    """``path`` given → it must exist and parse; otherwise the nearest pyproject.toml, if any."""
    target = path or find_pyproject(cwd)
    if target is None:
        return Config()
    try:
        data = tomlcache.load(target)
    except FileNotFoundError:
        raise ConfigError(f"{target}: no such file") from None
    except FileRefused as exc:  # a FIFO, /dev/zero, a directory, a huge file
        raise ConfigError(f"{target}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{target}: not valid TOML: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise ConfigError(f"{target}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{target}: cannot read: {exc.strerror}") from None
    section = data.get("tool", {}).get("cuda-doctor")
    if section is None and path is not None and target.name != "pyproject.toml":
        section = data  # a file of its own holds the keys at its top level
    if section is None:
        return Config()
    if not isinstance(section, dict):
        raise ConfigError(f"{target}: [tool.cuda-doctor] must be a table")
    return parse_config(section, target)


def _string_list(section: Mapping[str, Any], key: str, where: Path) -> tuple[str, ...]:
    value = section.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: field '{key}' must be a list of strings")
    _no_empty_entry(value, key, where)
    return tuple(v.strip().upper() for v in value)


def _no_empty_entry(entries: Iterable[str], key: str, where: Path) -> None:
    """An empty entry is a prefix of every rule id: it would select or ignore them all."""
    if any(not entry.strip() for entry in entries):
        raise ConfigError(
            f"{where}: field '{key}' has an empty entry, which names no rule "
            "(write rule ids, id prefixes such as CD5, or categories)"
        )


def parse_config(section: Mapping[str, Any], where: Path) -> Config:
    known = {"select", "ignore", "severity", "rules-dirs", "fail-on", "gpu-min-free-percent"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown field '{unknown[0]}' in [tool.cuda-doctor] (known: {', '.join(sorted(known))})"
        )
    severity = section.get("severity", {})
    if not isinstance(severity, dict):
        raise ConfigError(f"{where}: field 'severity' must be a table of RULE = \"error|warning|info|off\"")
    _no_empty_entry(severity, "severity", where)
    for rule_id, level in severity.items():
        if level not in SEVERITY_CHOICES:
            raise ConfigError(
                f"{where}: field 'severity.{rule_id}' must be one of {', '.join(SEVERITY_CHOICES)}, got {level!r}"
            )
    dirs = section.get("rules-dirs", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise ConfigError(f"{where}: field 'rules-dirs' must be a list of directory paths")
    resolved = tuple((where.parent / d).resolve() for d in dirs)
    for directory in resolved:
        if not directory.is_dir():
            raise ConfigError(f"{where}: field 'rules-dirs': {directory} is not a directory")
    fail_on = section.get("fail-on")
    if fail_on is not None and fail_on not in FAIL_ON_CHOICES:
        raise ConfigError(f"{where}: field 'fail-on' must be one of {', '.join(FAIL_ON_CHOICES)}")
    floor = section.get("gpu-min-free-percent")
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor < 100):
        raise ConfigError(f"{where}: field 'gpu-min-free-percent' must be a number from 0 to 100, got {floor!r}")
    return Config(
        select=_string_list(section, "select", where),
        ignore=_string_list(section, "ignore", where),
        severity={str(k).strip().upper(): str(v) for k, v in severity.items()},
        rules_dirs=resolved,
        fail_on=fail_on,
        source=where,
        gpu_min_free_percent=None if floor is None else float(floor),
    )

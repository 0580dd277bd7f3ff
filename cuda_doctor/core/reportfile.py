"""Report files (the schema ``checkreport`` writes): reading them back, their checks, and the one error.

Reading is bounded (docs/json-schema.md): at most ``MAX_BYTES``, regular files only, and JSON nested too
deeply is an error, not a crash.  msgspec decodes when installed; what it refuses goes to ``json``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cuda_doctor.base.errors import UserError
from cuda_doctor.base.reading import FileRefused, read_bytes
from cuda_doctor.core.checkreport import SCHEMA, SCHEMA_VERSION
from cuda_doctor.core.results import Result, Status

if TYPE_CHECKING:
    from json import JSONDecodeError

#: A report is tens of kilobytes; anything this large is not one.
MAX_BYTES = 64 * 2**20
#: Files per worker process below which another worker costs more than it saves (``jobs=0``).
REPORTS_PER_JOB = 250
_STATUSES = {s.value for s in Status}
_LISTS = (list, tuple)  # a tuple: the key is absent (the default in _parse_results)
_NO_EVIDENCE: dict[str, Any] = {}
_FACTS_ONLY = "facts only (no rule results): written by `cuda-doctor facts`"
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


class ReportFileError(UserError):
    """A report or facts file that cannot be used; ``str()`` is one line naming the file."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __reduce__(self) -> tuple[type[ReportFileError], tuple[str, str]]:
        # Made again from its two parts when it comes back from a worker process.
        return type(self), (self.path, self.reason)


class SavedReport(NamedTuple):
    """A report file as read back: what re-judging and comparisons use."""

    path: str
    host: str  # the report's host, else its system.hostname fact, else the file's name
    created: str | None
    tool_version: str | None
    schema_version: int  # 0 for a bare facts dump
    values: Mapping[str, Any]
    unknown: Mapping[str, str]
    results: tuple[Result, ...] = ()
    notes: tuple[str, ...] = ()  # what was read leniently, e.g. an older schema
    command: str | None = None  # "check", or "facts" for a facts-only report

    @property
    def has_results(self) -> bool:
        """Whether rules were judged: a ``facts`` report (or a bare dump) has no verdicts."""
        return bool(self.results)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)


class Fields(NamedTuple):
    """What a caller keeps of each report (still checked whole); ``facts`` must be a module-level function."""

    facts: Callable[[Mapping[str, Any]], dict[str, Any]]
    statuses: frozenset[Status]


def load_report(path: str | Path, fields: Fields | None = None) -> SavedReport:
    """Read and check one report file; raises ``ReportFileError`` naming the file."""
    try:
        raw = read_bytes(path, MAX_BYTES, "a report file")
    except FileRefused as exc:
        raise ReportFileError(path, str(exc.strerror)) from None
    except OSError as exc:
        raise ReportFileError(path, f"cannot read: {_os_reason(path, exc)}") from None
    return parse_report(_decode(raw, str(path)), str(path), fields)


@functools.cache
def fast_decoder() -> Callable[[bytes], Any] | None:
    """msgspec's JSON decoder when it is installed (``pip install 'cuda-doctor[fast]'``), else None."""
    try:
        from msgspec.json import Decoder
    except ImportError:  # the optional extra is not installed: the standard library decodes
        return None
    return Decoder().decode


def _decode(raw: bytes, shown: str) -> Any:
    fast = fast_decoder()
    if fast is not None:
        with contextlib.suppress(ValueError, RecursionError):  # msgspec.DecodeError is a ValueError: json decides
            return fast(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReportFileError(shown, "not a JSON report (the file is not UTF-8 text)") from None
    if not text.strip():
        raise ReportFileError(shown, "empty file (the report was never written, or was cut off)")
    import json  # only reading a saved report needs it; a plain check never imports json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFileError(shown, _describe_json_error(text, exc)) from None
    except RecursionError:
        raise ReportFileError(shown, "not a cuda-doctor report (JSON nested too deeply to read)") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise ReportFileError(shown, f"not valid JSON: {exc}") from None


def _os_reason(path: str | Path, exc: OSError) -> str:
    """The OS error in words; a symlink that leads nowhere says where it points."""
    if exc.errno == errno.ELOOP:
        return "a symlink loop (too many levels of symbolic links)"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"a symlink to {os.readlink(path)}, which does not exist"
    return str(exc.strerror or exc)


def _describe_json_error(text: str, exc: JSONDecodeError) -> str:
    if text.lstrip()[:1] not in ("{", "["):
        return "not JSON (was the report saved with --format json?)"
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        return f"truncated JSON (not valid JSON): the file ends at line {exc.lineno} before the report is complete"
    return f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def parse_report(data: Any, path: str, fields: Fields | None = None) -> SavedReport:
    """Check decoded JSON as a report, or as a bare facts dump (``values`` and ``unknown``)."""
    report = _parse(data, path, None if fields is None else frozenset(s.value for s in fields.statuses))
    if fields is None:
        return report
    return report._replace(
        values=fields.facts(report.values),
        unknown={},
        results=tuple(r for r in report.results if r.status in fields.statuses),
    )


def _parse(data: Any, path: str, keep: frozenset[str] | None) -> SavedReport:
    if not isinstance(data, dict):
        kind = _JSON_KINDS.get(type(data), "null" if data is None else type(data).__name__)
        raise ReportFileError(path, f"not a cuda-doctor report (top level is a JSON {kind})")
    schema = data.get("schema")
    if schema is None and "facts" not in data:
        if "values" in data:
            return _from_facts_dump(data, path)
        raise ReportFileError(path, f"not a cuda-doctor report (no 'schema' field, expected {SCHEMA!r})")
    if schema is not None and schema != SCHEMA:
        raise ReportFileError(path, f"not a cuda-doctor report (schema is {schema!r}, expected {SCHEMA!r})")
    # A hand-made {"facts": …} without a schema is read as a report of this version.
    version = _version(data.get("schema_version", SCHEMA_VERSION if schema is None else None), data, path)
    facts = data.get("facts")
    if not isinstance(facts, dict) or not isinstance(facts.get("values"), dict):
        raise ReportFileError(path, "no facts found: the report has no 'facts.values' object")
    values: dict[str, Any] = facts["values"]
    unknown = _unknown(facts.get("unknown", {}), path)
    results, notes = _parse_results(data.get("results", []), path, keep)
    if schema is None:
        notes = ("no 'schema' field: read as a report", *notes)
    command = data.get("command")
    if not results:
        notes = (*notes, _FACTS_ONLY if command == "facts" else "no rule results in this report (facts only)")
    created = data.get("created")
    return SavedReport(
        path=path,
        host=str(data.get("host") or values.get("system.hostname") or Path(path).stem),
        created=str(created) if created is not None else None,
        tool_version=_tool_version(data),
        schema_version=version,
        values=values,
        unknown=unknown,
        results=results,
        notes=notes,
        command=str(command) if command is not None else None,
    )


def _version(version: Any, data: Mapping[str, Any], path: str) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ReportFileError(path, f"invalid schema_version {version!r} (expected a positive integer)")
    if version > SCHEMA_VERSION:
        writer = _tool_version(data) or "a newer cuda-doctor"
        raise ReportFileError(
            path,
            f"report schema version {version} (written by {writer}) is newer than this cuda-doctor understands "
            f"(version {SCHEMA_VERSION}); upgrade cuda-doctor (pip install --upgrade . from its repository)",
        )
    return version


def _unknown(raw: Any, path: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ReportFileError(path, "'unknown' must be an object of fact name → reason")
    return {str(k): str(v) for k, v in raw.items()}


def _from_facts_dump(data: dict[str, Any], path: str) -> SavedReport:
    """A bare {values, unknown} dump: facts without verdicts still re-judge and compare."""
    values = data["values"]
    if not isinstance(values, dict):
        raise ReportFileError(path, "facts dump must have 'values' and 'unknown' objects")
    return SavedReport(
        path=path,
        host=str(values.get("system.hostname") or Path(path).stem),
        created=None,
        tool_version=None,
        schema_version=0,
        values=values,
        unknown=_unknown(data.get("unknown", {}), path),
        notes=("facts only (no rule results): read from a bare `cuda-doctor facts` dump",),
        command="facts",
    )


def _parse_results(raw: Any, path: str, keep: frozenset[str] | None) -> tuple[tuple[Result, ...], tuple[str, ...]]:
    """The results, each checked; with ``keep``, one of another status in the written shape is skipped."""
    if not isinstance(raw, list):
        raise ReportFileError(path, "'results' must be a list")
    results: list[Result] = []
    skipped = 0
    for item in raw:
        if not isinstance(item, dict) or "rule" not in item:
            raise ReportFileError(path, "a result has no 'rule' id")
        status = item.get("status")
        if isinstance(status, str) and status not in _STATUSES:
            skipped += 1  # a status this version does not know (written by a newer tool): left out
            continue
        if (
            keep is not None
            and type(status) is str
            and status not in keep
            # as Result.to_dict writes it (lists, an evidence object), so from_dict takes it
            and type(item.get("commands", ())) in _LISTS
            and type(item.get("links", ())) in _LISTS
            and type(item.get("evidence", _NO_EVIDENCE)) is dict
        ):
            continue
        try:
            results.append(Result.from_dict(item))
        except (TypeError, KeyError, ValueError) as exc:
            raise ReportFileError(path, f"malformed result for rule {item.get('rule')!r}: {exc}") from None
    notes = (f"{skipped} result(s) with a status this version does not know were left out",)
    return tuple(results), notes if skipped else ()


def _tool_version(data: Mapping[str, Any]) -> str | None:
    tool = data.get("tool")
    if isinstance(tool, dict) and tool.get("version"):
        return f"{tool.get('name', 'cuda-doctor')} {tool['version']}"
    return None


def load_many(
    paths: Iterable[str | Path], fields: Fields | None = None, jobs: int = 1
) -> tuple[list[SavedReport], list[ReportFileError]]:
    """Load every report it can; the ones it cannot are returned as errors, in input order."""
    return load_unique(paths, fields, jobs)[:2]


def load_unique(
    paths: Iterable[str | Path], fields: Fields | None = None, jobs: int = 1
) -> tuple[list[SavedReport], list[ReportFileError], list[str]]:
    """``load_many`` of files and the ``*.json`` of directories (not recursive), each path read once, in
    ``jobs`` worker processes (0: as many as suit); the third item names the paths given again."""
    files: list[tuple[Path, Path | None]] = []  # each with its resolved path, when already known
    errors: list[ReportFileError] = []
    for entry in map(Path, paths):
        found = _json_files(entry) if entry.is_dir() else [(entry, None)]
        if not found:
            errors.append(ReportFileError(entry, "directory holds no *.json reports"))
        files.extend(found)
    unique, repeated = _unique(files)
    outcomes = None
    if jobs != 1 and len(unique) > 1:
        from cuda_doctor.base import parallel

        jobs = jobs or parallel.default_jobs(len(unique), REPORTS_PER_JOB)
        outcomes = parallel.map_chunks(functools.partial(_load_chunk, fields=fields), unique, jobs)
    reports: list[SavedReport] = []
    for loaded in _load_chunk(unique, fields) if outcomes is None else outcomes:
        if isinstance(loaded, ReportFileError):
            errors.append(loaded)
        else:
            reports.append(loaded)
    return reports, errors, repeated


def _json_files(folder: Path) -> list[tuple[Path, Path | None]]:
    """Every ``*.json`` entry (even one that will fail to load), sorted; with its resolved path unless a symlink."""
    found: list[tuple[Path, Path | None]] = []
    try:
        real = folder.resolve()
        with os.scandir(folder) as entries:
            for e in entries:
                if e.name.endswith(".json"):
                    found.append((folder / e.name, None if e.is_symlink() else real / e.name))
    except OSError:  # an unreadable folder: named as holding no reports, as a glob would have it
        return []
    return sorted(found, key=lambda pair: pair[0].name)


def _unique(files: list[tuple[Path, Path | None]]) -> tuple[list[Path], list[str]]:
    unique: dict[Path, Path] = {}  # each resolved path → the first file given for it
    repeated: list[str] = []
    for f, resolved in files:
        try:
            key = resolved or f.resolve()
        except (OSError, RuntimeError):
            key = f.absolute()  # a symlink loop: it fails to load and is named then
        if key in unique:
            repeated.append(str(f))
        else:
            unique[key] = f
    return list(unique.values()), repeated


def _load_chunk(files: Sequence[Path], fields: Fields | None) -> list[SavedReport | ReportFileError]:
    out: list[SavedReport | ReportFileError] = []
    with gc_paused():
        for f in files:
            try:
                out.append(load_report(f, fields))
            except ReportFileError as exc:
                out.append(exc)
    return out


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cycle collector while building many JSON objects: they hold no cycles, yet trigger it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

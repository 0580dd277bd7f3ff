"""Reading saved reports (``cuda-doctor check --save FILE``) and checking their shape.

Every way a file can be unusable becomes a ``ReportError`` that names the file and says
what is wrong with it in one line, so a fleet comparison can list the bad files and go on
with the rest.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_doctor.results import Result

#: The report schema this version writes and fully understands.
SUPPORTED_SCHEMA = 1
SCHEMA_NAME = "cuda-doctor/report"


class ReportError(Exception):
    """A report that cannot be used; ``str()`` is one line naming the file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Report:
    """The parts of a saved report that comparisons use."""

    path: str
    host: str
    created: str | None
    tool_version: str | None
    schema_version: int
    values: Mapping[str, Any]
    unknown: Mapping[str, str]
    results: tuple[Result, ...] = ()
    notes: tuple[str, ...] = field(default=())  # what was read leniently, e.g. an older schema
    command: str | None = None  # "check", or "facts" for a facts-only report

    @property
    def has_results(self) -> bool:
        """Whether rules were judged: a ``facts`` report (or a bare dump) has no verdicts."""
        return bool(self.results)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)


def load_report(path: str | Path) -> Report:
    """Read and validate one report file; raises ``ReportError`` naming the file."""
    shown = str(path)
    try:
        raw = Path(path).read_bytes()
    except IsADirectoryError:
        raise ReportError(shown, "is a directory, not a report file") from None
    except OSError as exc:
        raise ReportError(shown, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReportError(shown, "not a JSON report (the file is not UTF-8 text)") from None
    if not text.strip():
        raise ReportError(shown, "empty file (the report was never written, or was cut off)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(shown, _describe_json_error(text, exc)) from None
    return parse_report(data, shown)


def _describe_json_error(text: str, exc: json.JSONDecodeError) -> str:
    stripped = text.lstrip()
    if stripped[:1] not in ("{", "["):
        return "not JSON (was the report saved with --format json?)"
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        # The parser ran out of text: the usual sign of a copy or write that was cut short.
        return f"truncated JSON: the file ends at line {exc.lineno} before the report is complete"
    return f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def parse_report(data: Any, path: str) -> Report:
    """Validate decoded JSON as a report (or a bare ``cuda-doctor facts`` dump)."""
    if not isinstance(data, dict):
        raise ReportError(path, f"not a cuda-doctor report (top level is a JSON {_kind(data)})")
    if "schema" not in data and "values" in data and "unknown" in data:
        return _from_facts_dump(data, path)
    schema = data.get("schema")
    if schema != SCHEMA_NAME:
        found = "no 'schema' field" if schema is None else f"schema is {schema!r}"
        raise ReportError(path, f"not a cuda-doctor report ({found}, expected {SCHEMA_NAME!r})")
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ReportError(path, f"invalid schema_version {version!r} (expected a positive integer)")
    if version > SUPPORTED_SCHEMA:
        writer = _tool_version(data) or "a newer cuda-doctor"
        raise ReportError(
            path,
            f"report schema version {version} (written by {writer}) is newer than this "
            f"cuda-doctor understands (version {SUPPORTED_SCHEMA}); upgrade cuda-doctor "
            "(pip install --upgrade . from its repository)",
        )
    facts = data.get("facts")
    if not isinstance(facts, dict) or not isinstance(facts.get("values"), dict):
        raise ReportError(path, "report has no 'facts.values' object")
    values: dict[str, Any] = facts["values"]
    unknown_raw = facts.get("unknown", {})
    unknown = {str(k): str(v) for k, v in unknown_raw.items()} if isinstance(unknown_raw, dict) else {}
    results, notes = _parse_results(data.get("results", []), path)
    host = data.get("host") or values.get("system.hostname") or Path(path).stem
    created = data.get("created")
    command = data.get("command")
    if not results:
        notes = (*notes, _FACTS_ONLY if command == "facts" else "no rule results in this report (facts only)")
    return Report(
        path=path,
        host=str(host),
        created=str(created) if created is not None else None,
        tool_version=_tool_version(data),
        schema_version=version,
        values=values,
        unknown=unknown,
        results=results,
        notes=notes,
        command=str(command) if command is not None else None,
    )


_FACTS_ONLY = "facts only (no rule results): written by `cuda-doctor facts`"


def _from_facts_dump(data: dict[str, Any], path: str) -> Report:
    # `cuda-doctor facts --format json` output: facts without verdicts still compare.
    values = data["values"]
    unknown = data["unknown"]
    if not isinstance(values, dict) or not isinstance(unknown, dict):
        raise ReportError(path, "facts dump must have 'values' and 'unknown' objects")
    host = values.get("system.hostname") or Path(path).stem
    return Report(
        path=path,
        host=str(host),
        created=None,
        tool_version=None,
        schema_version=0,
        values=values,
        unknown={str(k): str(v) for k, v in unknown.items()},
        results=(),
        notes=("facts only (no rule results): read from a bare `cuda-doctor facts` dump",),
        command="facts",
    )


def _parse_results(raw: Any, path: str) -> tuple[tuple[Result, ...], tuple[str, ...]]:
    if not isinstance(raw, list):
        raise ReportError(path, "'results' must be a list")
    results: list[Result] = []
    skipped = 0
    for item in raw:
        if not isinstance(item, dict) or "rule" not in item:
            raise ReportError(path, "a result has no 'rule' id")
        try:
            results.append(Result.from_dict(item))
        except ValueError:
            # A status this version does not know (written by a newer tool): leave it out.
            skipped += 1
        except (TypeError, KeyError) as exc:
            raise ReportError(path, f"malformed result for rule {item.get('rule')!r}: {exc}") from None
    notes = (f"{skipped} result(s) with a status this version does not know were left out",)
    return tuple(results), notes if skipped else ()


def _tool_version(data: Mapping[str, Any]) -> str | None:
    tool = data.get("tool")
    if isinstance(tool, dict) and tool.get("version"):
        return f"{tool.get('name', 'cuda-doctor')} {tool['version']}"
    return None


def _kind(value: Any) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def expand_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[ReportError]]:
    """Files as given; directories contribute their ``*.json`` files (sorted, not recursive)."""
    files: list[Path] = []
    errors: list[ReportError] = []
    for entry in paths:
        p = Path(entry)
        if p.is_dir():
            found = sorted(c for c in p.glob("*.json") if c.is_file())
            if not found:
                errors.append(ReportError(str(p), "directory holds no *.json reports"))
            files.extend(found)
        else:
            files.append(p)
    return files, errors


def unique_files(files: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """The files in order, each resolved path once; and the ones given again (as given)."""
    seen: set[Path] = set()
    unique: list[Path] = []
    repeated: list[str] = []
    for f in files:
        try:
            key = f.resolve()
        except (OSError, RuntimeError):
            key = f.absolute()  # a symlink loop: it will fail to load and be named then
        if key in seen:
            repeated.append(str(f))
            continue
        seen.add(key)
        unique.append(f)
    return unique, repeated


def load_many(paths: Iterable[str | Path]) -> tuple[list[Report], list[ReportError]]:
    """Load every report it can; the ones it cannot are returned as errors, in input order."""
    reports, errors, _ = load_unique(paths)
    return reports, errors


def load_unique(paths: Iterable[str | Path]) -> tuple[list[Report], list[ReportError], list[str]]:
    """``load_many``, reading a file given more than once (same resolved path) only once;
    the third item names the repeats so the caller can say they were counted once."""
    expanded, errors = expand_paths(paths)
    files, repeated = unique_files(expanded)
    reports: list[Report] = []
    with gc_paused():
        for f in files:
            try:
                reports.append(load_report(f))
            except ReportError as exc:
                errors.append(exc)
    return reports, errors, repeated


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cycle collector while building many JSON objects.

    Decoded JSON holds no reference cycles, yet each new dict counts towards the next
    collection: on a fleet of thousands of reports the collector's repeated walks over
    everything already loaded cost about a third of the time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

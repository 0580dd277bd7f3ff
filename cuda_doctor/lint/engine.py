"""Walk the paths, read each file once, dispatch by kind, apply suppressions and selection.

A file that cannot be linted becomes a CDL000 finding; the other files go on.
"""

from __future__ import annotations

import fnmatch
import functools
import multiprocessing
import os
import re
import stat
import tokenize
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

from cuda_doctor.core import rules as all_rules
from cuda_doctor.core.detectors import DETECTORS
from cuda_doctor.core.results import Severity
from cuda_doctor.core.rules import Rule, render_template
from cuda_doctor.core.selection import selected_ids
from cuda_doctor.lint.dockerfile import lint_dockerfile
from cuda_doctor.lint.findings import Finding, Hit, display_path
from cuda_doctor.lint.notebook import NotebookError, lint_notebook
from cuda_doctor.lint.prefilter import needs_ast
from cuda_doctor.lint.project import ProjectContext, ProjectFinder, read_small_text
from cuda_doctor.lint.python_ast import launch_for_project, lint_source
from cuda_doctor.lint.requirements import lint_pyproject, lint_requirements
from cuda_doctor.lint.shell import lint_shell
from cuda_doctor.lint.workflow import lint_workflow

MAX_BYTES = 5 * 1024 * 1024
PARALLEL_MIN_BYTES = 16 * 1024 * 1024  # of files to read: below this, workers cost more than they save
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})
SUPPRESS = re.compile(r"cuda-doctor:\s*ignore(?:\[(?P<ids>[A-Za-z0-9_,\s]+)\])?")


@dataclass(frozen=True)
class LintOptions:
    select: tuple[str, ...] = ()  # rule ids or prefixes; empty = all
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # fnmatch globs: relative path or any one path component
    severity: Mapping[str, str] = field(default_factory=dict)  # id → error|warning|info|off
    max_bytes: int = MAX_BYTES
    jobs: int = 0  # 0 = as many as CPUs, 1 = no worker processes


@dataclass
class LintReport:
    findings: list[Finding]
    files: int  # files looked at
    parsed: int  # Python sources whose AST was built
    rules: Mapping[str, Rule]


class MissingRuleError(LookupError):
    """A detector reports a rule id that no loaded rule has: a defect of cuda-doctor itself."""


def lint_rules(loaded: Iterable[Rule]) -> dict[str, Rule]:
    """The lint rules of ``loaded``, by id; every detector's rule must be among them."""
    rules = {rule.id: rule for rule in sorted(loaded, key=lambda rule: rule.id) if rule.kind == "lint"}
    for name, rule_id in DETECTORS.items():
        if rule_id not in rules:
            raise MissingRuleError(f"lint detector {name!r} reports {rule_id}, but no rule {rule_id} is loaded")
    return rules


@functools.lru_cache(maxsize=1)
def builtin_rules() -> Mapping[str, Rule]:
    """The shipped lint rules, by id (read once per process)."""
    return lint_rules(all_rules.load_rules())


def _kind(name: str, parent: str, grandparent: str, explicit: bool) -> str | None:
    lower = name.lower()
    if lower.endswith((".py", ".pyw")):
        return "python"
    if lower.endswith(".ipynb"):
        return "notebook"
    if (
        lower in ("dockerfile", "containerfile")
        or lower.startswith(("dockerfile.", "containerfile."))
        or lower.endswith((".dockerfile", ".containerfile"))
    ):
        return "dockerfile"
    if lower == "pyproject.toml":
        return "pyproject"
    if lower.endswith((".txt", ".in")) and (
        "requirements" in lower or "constraints" in lower or parent == "requirements"
    ):
        return "requirements"
    if lower.endswith((".sh", ".bash")):
        return "shell"
    if lower.endswith((".yml", ".yaml")) and parent == "workflows" and grandparent == ".github":
        return "workflow"
    if explicit and "." not in name:
        return "script"  # decided by its #! line once read
    return None


@dataclass(frozen=True)
class Target:
    path: Path
    kind: str | None
    problem: str | None = None  # a reason it cannot be read, found while walking


def excluded(relative: Path, globs: Sequence[str]) -> bool:
    """``--exclude``: the glob matches the relative path as a whole, or one of its components."""
    whole = relative.as_posix()
    return any(
        fnmatch.fnmatch(whole, glob) or any(fnmatch.fnmatch(part, glob) for part in relative.parts) for glob in globs
    )


def discover(paths: Sequence[Path], exclude: Sequence[str] = ()) -> Iterator[Target]:
    seen_dirs: set[tuple[int, int]] = set()
    for path in paths:
        if excluded(path, exclude):
            continue
        kind = _kind(path.name, path.parent.name, path.parent.parent.name, True)
        try:
            info = path.stat()
        except OSError as exc:
            yield Target(path, kind, _os_reason(exc))
            continue
        if stat.S_ISDIR(info.st_mode):
            yield from _walk(path, seen_dirs, path, exclude)
        else:
            yield Target(path, kind)


def _walk(root: Path, seen: set[tuple[int, int]], top: Path, exclude: Sequence[str]) -> Iterator[Target]:
    try:
        info = root.stat()
        if (info.st_dev, info.st_ino) in seen:
            return  # reached again through a symlink: already walked
        seen.add((info.st_dev, info.st_ino))
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        yield Target(root, None, _os_reason(exc))
        return
    parent, grandparent = root.name, root.parent.name
    for entry in entries:
        name = entry.name
        if exclude and excluded(Path(entry.path).relative_to(top), exclude):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError as exc:
            yield Target(Path(entry.path), _kind(name, parent, grandparent, False), _os_reason(exc))
            continue
        if entry.is_symlink() and not _inside(entry.path, top):
            continue  # a link out of the folder being linted (to / or a home): not followed
        if is_dir:
            if name == ".github":
                workflows = os.path.join(entry.path, "workflows")
                if os.path.isdir(workflows):
                    yield from _walk(Path(workflows), seen, top, exclude)  # CI workflows only
                continue
            if name.startswith(".") or name in SKIP_DIRS:
                continue
            # os.path.exists, not Path.exists: before Python 3.13 the latter raises on EACCES
            if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                continue  # a virtual environment
            yield from _walk(Path(entry.path), seen, top, exclude)
            continue
        kind = _kind(name, parent, grandparent, False)
        if kind is None:
            continue
        path = Path(entry.path)
        if entry.is_symlink():
            try:
                os.stat(path)
            except OSError as exc:  # a dangling link, or a loop of them
                yield Target(path, kind, _os_reason(exc))
                continue
        yield Target(path, kind)


def _inside(path: str, top: Path) -> bool:
    """Whether ``path``, with its links resolved, is inside ``top`` (resolved too)."""
    real, root = os.path.realpath(path), os.path.realpath(top)
    return real == root or real.startswith(root.rstrip("/") + "/")


def _os_reason(exc: OSError) -> str:
    return "symbolic link loop" if exc.errno == 40 else f"cannot read: {exc.strerror or exc}"  # 40: ELOOP


@dataclass
class Source:
    path: Path
    kind: str
    data: bytes
    text: str


def _unlintable(reason: str, line: int = 1, column: int = 1, severity: Severity | None = None) -> Hit:
    return Hit.make("CDL000", line, column, severity=severity, reason=reason)


def read_source(target: Target, max_bytes: int) -> Source | Hit:
    if target.problem:
        return _unlintable(target.problem)
    path = target.path
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return _unlintable("not a regular file")
        if info.st_size > max_bytes:
            limit = f"skipped: {info.st_size / 1e6:.1f} MB is over the {max_bytes / 1e6:.0f} MB limit"
            return _unlintable(limit, severity=Severity.INFO)
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return _unlintable(_os_reason(exc))
    if target.kind is None:
        return Source(path, "none", data, "")  # named on the command line, but no kind lint reads
    if b"\0" in data[:8192]:
        return _unlintable("binary file (contains NUL bytes)")
    kind = target.kind
    if kind == "script":
        first = data.split(b"\n", 1)[0]
        if first.startswith(b"#!") and b"python" in first:
            kind = "python"
        elif first.startswith(b"#!") and re.search(rb"\b(ba|z|da)?sh\b", first):
            kind = "shell"
        else:
            return Source(path, "none", data, "")
    try:
        text = data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as exc:
        declared = _declared_encoding(data) if kind == "python" else None
        if declared is None:
            line = data.count(b"\n", 0, exc.start) + 1
            return _unlintable(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line)
        try:
            text = data.decode(declared)
        except (UnicodeDecodeError, LookupError) as err:
            return _unlintable(f"cannot decode as {declared}: {err}")
    return Source(path, kind, data, text)


def _declared_encoding(data: bytes) -> str | None:
    try:
        encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)
    except SyntaxError:
        return None
    return None if encoding in ("utf-8", "utf-8-sig") else encoding


def lint_one(source: Source, context: ProjectContext, pin: tuple[str, str] | None) -> list[Hit]:
    """``pin``: (release, as written) of the exact torch pin of the file's project (CDL201)."""
    kind, path, text = source.kind, source.path, source.text
    if kind == "python":
        try:  # on the bytes the pre-filter judged
            return lint_source(text, context.relative(path), context, source.data)
        except SyntaxError as exc:
            line, column = exc.lineno or 1, exc.offset or 1
            return [_unlintable(f"syntax error at line {line}, column {column} ({exc.msg})", line, column)]
        except (RecursionError, MemoryError, ValueError) as exc:
            return [_unlintable(f"cannot parse: {type(exc).__name__}")]
    if kind == "notebook":
        try:
            return lint_notebook(text, context, context.relative(path))
        except NotebookError as exc:
            return [_unlintable(str(exc))]
    if kind == "dockerfile":
        return lint_dockerfile(text, path, read_small_text)
    if kind == "requirements":
        return lint_requirements(text, pin)
    if kind == "pyproject":
        try:
            return lint_pyproject(text, pin)
        except ValueError as exc:  # tomllib.TOMLDecodeError
            return [_unlintable(f"not valid TOML: {exc}")]
    if kind == "shell":
        return lint_shell(text)
    if kind == "workflow":
        return lint_workflow(text)
    return []


@dataclass(frozen=True)
class FileTask:
    """One file to check, with its project (picklable: sent to worker processes)."""

    target: Target
    context: ProjectContext
    max_bytes: int


@dataclass
class FileResult:
    hits: list[Hit]
    parsed: bool = False
    lines: list[str] | None = None  # the file's lines when it mentions a suppression comment


def check_file(task: FileTask) -> FileResult:
    """Read, pre-filter and lint one file (in this process or a worker)."""
    got = read_source(task.target, task.max_bytes)
    if isinstance(got, Hit):
        return FileResult([got])
    context = task.context
    compilerless = context.compilerless is not None
    if got.kind == "none" or (
        got.kind == "python" and not needs_ast(got.data, context.relative(got.path), compilerless)
    ):
        return FileResult([])
    pin = context.torch.exact() if got.kind in ("requirements", "pyproject") else None
    try:  # error isolation: a detector bug on one file is a finding, never a crash
        # the launcher is deprecated, and torchrun there, only from a torch release on
        judged = [
            launch_for_project(h, context.torch) if h.rule_id == "CDL006" else h for h in lint_one(got, context, pin)
        ]
        hits = [h for h in judged if h is not None]
    except Exception as exc:
        hits = [_unlintable(f"internal error: {type(exc).__name__}: {exc}", severity=Severity.ERROR)]
    lines = got.text.splitlines() if hits and b"cuda-doctor" in got.data else None
    return FileResult(hits, got.kind == "python", lines)


def lint_paths(
    paths: Sequence[Path], options: LintOptions | None = None, rules: Mapping[str, Rule] | None = None
) -> LintReport:
    """Lint ``paths`` with ``rules`` (from ``lint_rules``; default: the shipped ones)."""
    options = options or LintOptions()
    rules = rules if rules is not None else builtin_rules()
    finder = ProjectFinder()
    tasks = [FileTask(t, finder.context(t.path), options.max_bytes) for t in discover(paths, options.exclude)]
    results = list(zip(tasks, _run(tasks, options.jobs), strict=True))
    chosen = selected_ids(rules.values(), options.select, options.ignore) & enabled_ids(rules, options.select)
    enabled = {rule_id for rule_id in chosen if rules[rule_id].severity_override(options.severity) != "off"}
    unknown = sorted({hit.rule_id for _, result in results for hit in result.hits} - rules.keys())
    if unknown:  # never dropped in silence: a detector and the rule files disagree
        raise MissingRuleError(f"a lint detector reported {', '.join(unknown)}, which has no rule")
    findings = [
        render_hit(task.target.path, hit, rules[hit.rule_id], options)
        for task, result in results
        for hit in result.hits
        if hit.rule_id in enabled and not _suppressed(result.lines, hit)
    ]
    findings.sort(key=Finding.sort_key)
    return LintReport(findings, len(tasks), sum(result.parsed for _, result in results), rules)


def enabled_ids(rules: Mapping[str, Rule], select: Sequence[str]) -> set[str]:
    """Every rule but the opt-in ones (``opt_in = true``), which run only where a ``select`` entry names
    them by id: a prefix or a category (``CDL``, ``code``) does not turn them on."""
    named = {entry.strip().upper() for entry in select}
    return {rule_id for rule_id, rule in rules.items() if not rule.opt_in or rule_id in named}


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # reported when the file is read


def _run(tasks: list[FileTask], jobs: int) -> list[FileResult]:
    workers = jobs or (os.cpu_count() or 1)
    sizes = [_size(t.target.path) for t in tasks] if workers > 1 and len(tasks) >= 4 else []
    if sum(sizes) < PARALLEL_MIN_BYTES:
        return [check_file(task) for task in tasks]
    # Big files first so that no worker is left with one large file at the end.
    order = sorted(range(len(tasks)), key=lambda i: -sizes[i])
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        results = dict(zip(order, pool.map(check_file, [tasks[i] for i in order], chunksize=32), strict=True))
    return [results[index] for index in range(len(tasks))]


def _suppressed(lines: list[str] | None, hit: Hit) -> bool:
    """``# cuda-doctor: ignore[ID,…]`` (or bare ``ignore``) on the line, or alone on the line above."""
    if not lines:
        return False
    candidates = []
    if 0 < hit.line <= len(lines):
        candidates.append(lines[hit.line - 1])
    if 1 < hit.line <= len(lines) + 1:
        above = lines[hit.line - 2]
        if above.lstrip().startswith(("#", '"#')):  # a comment line (in a notebook: JSON-quoted)
            candidates.append(above)
    for line in candidates:
        for match in SUPPRESS.finditer(line):
            ids = match.group("ids")
            if ids is None or hit.rule_id in {i.strip().upper() for i in ids.split(",")}:
                return True
    return False


def render_hit(path: Path, hit: Hit, rule: Rule, options: LintOptions) -> Finding:
    captures = hit.capture_dict()
    override = rule.severity_override(options.severity)
    return Finding(
        path=display_path(path),
        line=hit.line,
        column=hit.column,
        rule_id=rule.id,
        severity=Severity(override) if override else hit.severity or rule.severity,
        message=render_template(rule.message, captures.get),
        fix=render_template(rule.fix or "", captures.get) or None,
        title=rule.title,
        category=rule.category,
    )

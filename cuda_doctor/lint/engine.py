"""Walk the paths, read each file once, dispatch by kind, apply suppressions and selection.

A file that cannot be linted (unreadable, binary, not UTF-8, a syntax error, too big, a
symlink loop, or a bug in a detector) becomes a CDL000 finding; the other files go on.
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

from cuda_doctor import rules as all_rules
from cuda_doctor.lint.detectors import DETECTORS
from cuda_doctor.lint.dockerfile import lint_dockerfile
from cuda_doctor.lint.findings import Finding, Hit
from cuda_doctor.lint.notebook import NotebookError, lint_notebook
from cuda_doctor.lint.python_ast import ProjectFlags, has_loop_tokens, lint_source, needs_ast
from cuda_doctor.lint.requirements import lint_pyproject, lint_requirements, project_torch
from cuda_doctor.lint.shell import lint_shell
from cuda_doctor.results import Severity
from cuda_doctor.rules import Rule, render_template
from cuda_doctor.selection import selected_ids

MAX_BYTES = 5 * 1024 * 1024
PARALLEL_MIN_BYTES = 8 * 1024 * 1024  # below this, starting workers costs more than it saves
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})
SUPPRESS = re.compile(r"cuda-doctor:\s*ignore(?:\[(?P<ids>[A-Za-z0-9_,\s]+)\])?")
PROJECT_SCAN_LIMIT = 5000


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


def kind_of(path: Path, explicit: bool) -> str | None:
    name = path.name
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
        "requirements" in lower or "constraints" in lower or path.parent.name == "requirements"
    ):
        return "requirements"
    if lower.endswith((".sh", ".bash")):
        return "shell"
    if explicit and "." not in name:
        return "script"  # decided by its #! line once read
    return None


# -- discovery ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    path: Path
    kind: str | None
    problem: str | None = None  # a reason it cannot be read, found while walking


def excluded(relative: Path, globs: Sequence[str]) -> bool:
    """``--exclude``: the glob matches the relative path as a whole, or one of its components."""
    if not globs:
        return False
    whole = relative.as_posix()
    return any(
        fnmatch.fnmatch(whole, glob) or any(fnmatch.fnmatch(part, glob) for part in relative.parts) for glob in globs
    )


def discover(paths: Sequence[Path], exclude: Sequence[str] = ()) -> Iterator[Target]:
    seen_dirs: set[tuple[int, int]] = set()
    for path in paths:
        if excluded(path, exclude):
            continue
        try:
            info = path.stat()
        except OSError as exc:
            yield Target(path, kind_of(path, True), _os_reason(exc))
            continue
        if stat.S_ISDIR(info.st_mode):
            yield from _walk(path, seen_dirs, path, exclude)
        else:
            yield Target(path, kind_of(path, True))


def _walk(root: Path, seen: set[tuple[int, int]], top: Path, exclude: Sequence[str]) -> Iterator[Target]:
    try:
        info = root.stat()
    except OSError as exc:
        yield Target(root, None, _os_reason(exc))
        return
    key = (info.st_dev, info.st_ino)
    if key in seen:
        return  # reached again through a symlink: already walked
    seen.add(key)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        yield Target(root, None, _os_reason(exc))
        return
    for entry in entries:
        path = Path(entry.path)
        if excluded(path.relative_to(top), exclude):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError as exc:
            yield Target(path, kind_of(path, False), _os_reason(exc))
            continue
        if is_dir:
            if entry.name.startswith(".") or entry.name in SKIP_DIRS:
                continue
            # os.path.exists, not Path.exists: before Python 3.13 the latter raises on EACCES
            if os.path.exists(path / "pyvenv.cfg"):
                continue  # a virtual environment
            yield from _walk(path, seen, top, exclude)
            continue
        kind = kind_of(path, False)
        if kind is None:
            continue
        if entry.is_symlink() and not os.path.exists(path):
            yield Target(path, kind, _broken_link_reason(path))
            continue
        yield Target(path, kind)


def _broken_link_reason(path: Path) -> str:
    try:
        path.stat()
    except OSError as exc:
        return _os_reason(exc)
    return "dangling symbolic link"


def _os_reason(exc: OSError) -> str:
    if exc.errno == 40:  # ELOOP
        return "symbolic link loop"
    return f"cannot read: {exc.strerror or exc}"


# -- reading ------------------------------------------------------------------------------


@dataclass
class Source:
    path: Path
    kind: str
    data: bytes
    text: str


def read_source(target: Target, max_bytes: int) -> Source | Hit:
    if target.problem:
        return Hit.make("CDL000", 1, 1, reason=target.problem)
    path = target.path
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return Hit.make("CDL000", 1, 1, reason="not a regular file")
        if info.st_size > max_bytes:
            return Hit.make(
                "CDL000",
                1,
                1,
                severity=Severity.INFO,
                reason=f"skipped: {info.st_size / 1e6:.1f} MB is over the {max_bytes / 1e6:.0f} MB limit",
            )
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return Hit.make("CDL000", 1, 1, reason=_os_reason(exc))
    if b"\0" in data[:8192]:
        return Hit.make("CDL000", 1, 1, reason="binary file (contains NUL bytes)")
    kind = target.kind or "python"
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
            return Hit.make("CDL000", line, 1, reason=f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})")
        try:
            text = data.decode(declared)
        except (UnicodeDecodeError, LookupError) as err:
            return Hit.make("CDL000", 1, 1, reason=f"cannot decode as {declared}: {err}")
    return Source(path, kind, data, text)


def _declared_encoding(data: bytes) -> str | None:
    try:
        encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)
    except SyntaxError:
        return None
    return None if encoding in ("utf-8", "utf-8-sig") else encoding


# -- project-wide mentions ----------------------------------------------------------------


def project_root(path: Path) -> Path | None:
    for directory in _real(path).parents:
        if any(os.path.exists(directory / marker) for marker in (".git", "pyproject.toml", "setup.py")):
            return directory
    return None


def scan_project(root: Path, already: set[Path]) -> ProjectFlags:
    """What the rest of the project (files not linted now) mentions; bounded in file count."""
    flags = ProjectFlags()
    count = 0
    for target in discover([root]):
        if target.kind not in ("python", "notebook") or target.problem:
            continue
        resolved = _real(target.path)
        if resolved in already:
            continue
        count += 1
        if count > PROJECT_SCAN_LIMIT:
            break
        source = read_source(target, MAX_BYTES)
        if isinstance(source, Hit):
            continue  # a file of the wider project we cannot read changes nothing here
        flags = flags | ProjectFlags.of(source.data)
        if flags.amp and flags.grad_scaler and flags.cudnn_benchmark:
            break
    return flags


# -- linting one file ---------------------------------------------------------------------


def _read_small_text(path: Path) -> str | None:
    """A regular file of at most MAX_BYTES as UTF-8, else None (a FIFO or a device named by
    ``pip install -r`` would block or never end)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def lint_one(kind: str, path: Path, text: str, project: ProjectFlags) -> list[Hit]:
    if kind == "python":
        try:
            return lint_source(text, str(path), project)
        except SyntaxError as exc:
            line, column = exc.lineno or 1, exc.offset or 1
            return [
                Hit.make("CDL000", line, column, reason=f"syntax error at line {line}, column {column} ({exc.msg})")
            ]
        except (RecursionError, MemoryError, ValueError) as exc:
            return [Hit.make("CDL000", 1, 1, reason=f"cannot parse: {type(exc).__name__}")]
    if kind == "notebook":
        try:
            return lint_notebook(text, project)
        except NotebookError as exc:
            return [Hit.make("CDL000", 1, 1, reason=str(exc))]
    if kind == "dockerfile":
        return lint_dockerfile(text, path, _read_small_text)
    pin = (project.torch_release, project.torch_release_from) if project.torch_release else None
    if kind == "requirements":
        return lint_requirements(text, pin)
    if kind == "pyproject":
        try:
            return lint_pyproject(text, pin)
        except ValueError as exc:  # tomllib.TOMLDecodeError
            return [Hit.make("CDL000", 1, 1, reason=f"not valid TOML: {exc}")]
    if kind == "shell":
        return lint_shell(text)
    return []


def _guarded(kind: str, path: Path, text: str, project: ProjectFlags) -> list[Hit]:
    """Error isolation: a detector bug on one file is a finding, never a crash."""
    try:
        return lint_one(kind, path, text, project)
    except Exception as exc:
        return [
            Hit.make("CDL000", 1, 1, severity=Severity.ERROR, reason=f"internal error: {type(exc).__name__}: {exc}")
        ]


def _worker(task: tuple[str, str, str, ProjectFlags]) -> list[Hit]:
    kind, path, text, project = task
    return _guarded(kind, Path(path), text, project)


# -- the run ------------------------------------------------------------------------------


def lint_paths(
    paths: Sequence[Path], options: LintOptions | None = None, rules: Mapping[str, Rule] | None = None
) -> LintReport:
    """Lint ``paths`` with ``rules`` (from ``lint_rules``; default: the shipped ones)."""
    options = options or LintOptions()
    rules = rules if rules is not None else builtin_rules()
    raw: list[tuple[Path, Hit]] = []
    sources: list[Source] = []
    files = 0
    for target in discover(paths, options.exclude):
        files += 1
        got = read_source(target, options.max_bytes)
        if isinstance(got, Hit):
            raw.append((target.path, got))
        elif got.kind != "none":
            sources.append(got)

    project = ProjectFlags()
    for source in sources:
        if source.kind in ("python", "notebook"):
            project = project | ProjectFlags.of(source.data)
    project = _widen(project, sources) | _torch_pins(sources)

    tasks: list[tuple[str, str, str, ProjectFlags]] = []
    parsed = 0
    for source in sources:
        if source.kind == "python" and not needs_ast(source.data, project):
            continue
        parsed += source.kind == "python"
        tasks.append((source.kind, str(source.path), source.text, project))
    for (_, path, _, _), hits in zip(tasks, _run(tasks, options.jobs), strict=True):
        raw.extend((Path(path), hit) for hit in hits)

    # split once per file that mentions a suppression, not once per hit
    lines = {s.path: s.text.splitlines() for s in sources if "cuda-doctor" in s.text}
    chosen = selected_ids(rules.values(), options.select, options.ignore)
    enabled = {rule_id for rule_id in chosen if options.severity.get(rule_id) != "off"}
    unknown = sorted({hit.rule_id for _, hit in raw} - rules.keys())
    if unknown:  # never dropped in silence: a detector and the rule files disagree
        raise MissingRuleError(f"a lint detector reported {', '.join(unknown)}, which has no rule")
    findings = [
        render_hit(path, hit, rules[hit.rule_id], options)
        for path, hit in raw
        if hit.rule_id in enabled and not _suppressed(lines.get(path), hit)
    ]
    findings.sort(key=Finding.sort_key)
    return LintReport(findings, files, parsed, rules)


def _widen(project: ProjectFlags, sources: list[Source]) -> ProjectFlags:
    """'Anywhere in the project' includes files not passed (pre-commit passes changed files only)."""
    if project.amp and project.grad_scaler and project.cudnn_benchmark:
        return project
    candidates = [s for s in sources if s.kind in ("python", "notebook") and has_loop_tokens(s.data)]
    if not candidates:
        return project
    already = {_real(s.path) for s in sources}
    roots = {root for s in candidates if (root := project_root(s.path)) is not None}
    for root in sorted(roots):
        project = project | scan_project(root, already)
    return project


DEPENDENCY_KINDS = ("requirements", "pyproject")


def _torch_pins(sources: list[Source]) -> ProjectFlags:
    """The torch release the project pins: in the dependency files linted, else in those next to
    the linted files and at their project root (requirements*.txt, requirements/*.txt,
    pyproject.toml), read the way CDL201 reads them."""
    files: list[tuple[str, str, str]] = [(s.path.name, s.kind, s.text) for s in sources if s.kind in DEPENDENCY_KINDS]
    seen = {_real(s.path) for s in sources}
    folders: dict[Path, None] = {}  # ordered, and a look-up per folder instead of a list scan
    by_parent = {s.path.parent: s.path for s in sources}  # one root look-up per folder
    for path in by_parent.values():
        for folder in (path.parent, project_root(path)):
            if folder is not None:
                folders.setdefault(folder)
    for folder in folders:
        for path in _dependency_files(folder):
            resolved = _real(path)
            if resolved in seen:
                continue
            seen.add(resolved)
            text = _read_small_text(path)
            if text is not None:
                files.append((path.name, kind_of(path, False) or "", text))
    found = project_torch(files)
    return ProjectFlags(
        torch_release=found.release or "",
        torch_release_from=found.release_from or "",
        torch_below_2_4_from=found.below_2_4_from or "",
    )


def _dependency_files(folder: Path) -> list[Path]:
    try:
        candidates = sorted([*folder.iterdir(), *(folder / "requirements").glob("*.txt")])
    except OSError:
        return []  # an unreadable folder holds no pin we can use
    return [p for p in candidates if kind_of(p, False) in DEPENDENCY_KINDS and os.path.isfile(p)]


def _run(tasks: list[tuple[str, str, str, ProjectFlags]], jobs: int) -> Iterable[list[Hit]]:
    workers = jobs or (os.cpu_count() or 1)
    size = sum(len(t[2]) for t in tasks)
    if workers <= 1 or size < PARALLEL_MIN_BYTES or len(tasks) < 4:
        return [_worker(task) for task in tasks]
    # Big files first so that no worker is left with one large file at the end.
    order = sorted(range(len(tasks)), key=lambda i: -len(tasks[i][2]))
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        results = list(pool.map(_worker, [tasks[i] for i in order], chunksize=4))
    out: list[list[Hit]] = [[] for _ in tasks]
    for index, result in zip(order, results, strict=True):
        out[index] = result
    return out


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
    override = options.severity.get(rule.id)
    return Finding(
        path=_display(path),
        line=hit.line,
        column=hit.column,
        rule_id=rule.id,
        severity=Severity(override) if override else hit.severity or rule.severity,
        message=render_template(rule.message, captures.get),
        fix=render_template(rule.fix or "", captures.get) or None,
        title=rule.title,
        category=rule.category,
        end_line=hit.end_line,
        end_column=hit.end_column,
    )


def _display(path: Path) -> str:
    """Relative to the working directory when below it (links are not followed: they may loop)."""
    if not path.is_absolute():
        return path.as_posix()
    relative = os.path.relpath(path, Path.cwd())
    return path.as_posix() if relative.startswith("..") else Path(relative).as_posix()


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: Python 3.11 raises RuntimeError
        return path.absolute()

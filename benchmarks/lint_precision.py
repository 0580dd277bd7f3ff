"""Lint precision on real code: run `cuda-doctor lint` over a folder of checkouts and judge the findings.

    python benchmarks/lint_precision.py CORPUS                      # findings per rule and per repository
    python benchmarks/lint_precision.py CORPUS --dump findings.jsonl  # every finding, for a person to label
    python benchmarks/lint_precision.py CORPUS --labels labels.jsonl  # precision per rule and per severity
    python benchmarks/lint_precision.py CORPUS --alone              # each file linted alone vs the whole checkout

CORPUS is a folder whose sub-folders are checkouts (`owner__name/`); a checkout is named by its folder
(`owner__name` is shown as `owner/name`). Lint runs as `python -I -m cuda_doctor lint --format json` of
this interpreter, inside each checkout (`--backend api` calls `lint_paths` in this process instead).

A finding's key survives line shifts: `repo|path|rule|hash|n`, where hash is a digest of the stripped
source line the finding points at and n counts repeats of that (repo, path, rule, hash) in line order.
A labels file has one JSON object per line: {"key": …, "label": "right" | "wrong" | "debatable",
"reason": "…", "severity": "warning"} — `severity` (optional) is the severity the finding should have.
right = an ML engineer would agree it is a real problem and the printed fix is right; wrong = a false
positive; debatable = reasonable people disagree. Precision is right / labelled ("strict"),
(right + debatable) / labelled ("lenient"), and accepted / labelled ("accepted"), where a finding
is accepted when it is right at the severity it has (the label names no other severity), or
debatable at info where the label says info is its severity. `--labels` may be given several times
(an older labels file and one for findings that appeared since; a key labelled in two files is an
error). Labels whose key no longer matches a finding are listed by label: a vanished `right` is a
lost true positive, a vanished `wrong` a removed false positive.

`benchmarks/lint_sample/` holds a labelled sample: the repositories and commits, the labels, and
what the labels mean (its README).

`--check-prefilter` parses every Python file that lint's byte pre-filter skips and lists those
that would have had a finding (there should be none: the pre-filter must stay exact).

`--expected FILE` (JSON lines {"repo", "path", "rule", "line", "why"}; rule "*" for any rule, line a
number or a list of numbers) reports which findings that should exist are found. `--alone` lints
every file lint reads on its own (as pre-commit does with changed files) and compares its findings
with those the whole-checkout run gave that file.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LABELS = ("right", "wrong", "debatable")
SEVERITIES = ("error", "warning", "info")
LINT_TIMEOUT_S = 1800.0  # one whole checkout; a file alone gets ALONE_TIMEOUT_S
ALONE_TIMEOUT_S = 120.0
MAX_FILE_BYTES = 5 * 1024 * 1024  # source lines are read for keys and context, never more than this
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})


# -- records -------------------------------------------------------------------------------


@dataclass
class Record:
    """One finding of one checkout, with its path relative to the checkout."""

    repo: str
    path: str
    rule: str
    severity: str
    line: int
    column: int
    message: str
    fix: str | None
    key: str = ""

    def signature(self) -> tuple[str, int, int, str, str]:
        return (self.rule, self.line, self.column, self.severity, self.message)


@dataclass
class LintRun:
    repo: str
    files: int = 0
    seconds: float = 0.0
    records: list[Record] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Label:
    key: str
    label: str
    reason: str = ""
    severity: str | None = None


def repo_name(folder: Path) -> str:
    return folder.name.replace("__", "/", 1)


def line_hash(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8", "surrogateescape")).hexdigest()[:12]


def assign_keys(records: list[Record], source_line: Callable[[Record], str]) -> None:
    """Give each record its stable key; repeats of one (repo, path, rule, line text) count up in line order."""
    seen: Counter[tuple[str, str, str, str]] = Counter()
    for record in sorted(records, key=lambda r: (r.repo, r.path, r.line, r.column, r.rule, r.message)):
        base = (record.repo, record.path, record.rule, line_hash(source_line(record)))
        record.key = "|".join((*base, str(seen[base])))
        seen[base] += 1


class SourceLines:
    """The lines of corpus files, read once each (size-bounded; an unreadable file has no lines)."""

    def __init__(self, corpus: Path) -> None:
        self.corpus = corpus
        self.cache: dict[tuple[str, str], list[str]] = {}

    def lines(self, repo: str, path: str) -> list[str]:
        if (repo, path) not in self.cache:
            self.cache[(repo, path)] = self._read(self.corpus / repo.replace("/", "__", 1) / path)
        return self.cache[(repo, path)]

    @staticmethod
    def _read(path: Path) -> list[str]:
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES)
        except OSError:
            return []
        return data.decode("utf-8", "replace").splitlines()

    def line(self, record: Record) -> str:
        lines = self.lines(record.repo, record.path)
        return lines[record.line - 1] if 0 < record.line <= len(lines) else ""

    def context(self, record: Record, around: int) -> list[str]:
        lines = self.lines(record.repo, record.path)
        start, stop = max(1, record.line - around), min(len(lines), record.line + around)
        return [f"{'>' if n == record.line else ' '}{n:6} {lines[n - 1]}" for n in range(start, stop + 1)]


# -- running lint --------------------------------------------------------------------------


def to_records(repo: str, checkout: Path, findings: Iterable[dict[str, Any]]) -> list[Record]:
    out = []
    for item in findings:
        path = os.path.normpath(os.path.relpath(os.path.join(checkout, item["path"]), checkout))
        out.append(
            Record(
                repo=repo,
                path=Path(path).as_posix(),
                rule=str(item["rule"]),
                severity=str(item["severity"]),
                line=int(item["line"]),
                column=int(item.get("column") or 1),
                message=str(item["message"]),
                fix=item.get("fix"),
            )
        )
    return out


def lint_cli(checkout: Path, paths: Sequence[str], jobs: int, timeout: float) -> LintRun:
    """`cuda-doctor lint --format json` in the checkout; -I keeps the checkout's modules off sys.path."""
    run = LintRun(repo_name(checkout))
    argv = [sys.executable, "-I", "-m", "cuda_doctor", "lint", "--format", "json", "-j", str(jobs), *paths]
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        run.error = f"lint did not finish in {timeout:.0f} s"
        return run
    finally:
        run.seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        run.error = f"lint exited {done.returncode}: {done.stderr.strip()[-500:]}"
        return run
    try:
        document = json.loads(done.stdout)
    except ValueError as exc:
        run.error = f"lint printed no JSON document ({exc}): {done.stdout[:200]!r}"
        return run
    run.files = int(document.get("files", 0))
    run.records = to_records(run.repo, checkout, document.get("findings", []))
    return run


@contextmanager
def working_directory(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def lint_api(checkout: Path, paths: Sequence[str], jobs: int, timeout: float) -> LintRun:
    """`lint_paths` in this process (no interpreter start per call; follows the engine's current API)."""
    from cuda_doctor.lint.engine import LintOptions, lint_paths

    del timeout  # in-process: bounded by the caller's patience only
    run = LintRun(repo_name(checkout))
    start = time.perf_counter()
    with working_directory(checkout):
        try:
            report = lint_paths([Path(p) for p in paths], LintOptions(jobs=jobs))
        except Exception as exc:  # a crash of lint is a result to report, not a reason to stop
            run.error = f"lint raised {type(exc).__name__}: {exc}"
            return run
        finally:
            run.seconds = time.perf_counter() - start
    run.files = report.files
    run.records = to_records(run.repo, checkout, (f.to_dict() for f in report.findings))
    return run


BACKENDS: dict[str, Callable[[Path, Sequence[str], int, float], LintRun]] = {"cli": lint_cli, "api": lint_api}


def checkouts(corpus: Path, only: Sequence[str]) -> list[Path]:
    folders = sorted(p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith("."))
    if only:
        wanted = {name.replace("/", "__", 1) for name in only}
        folders = [p for p in folders if p.name in wanted]
    return folders


# -- precision arithmetic ------------------------------------------------------------------


@dataclass
class Tally:
    findings: int = 0
    right: int = 0
    wrong: int = 0
    debatable: int = 0
    accepted: int = 0

    @property
    def labelled(self) -> int:
        return self.right + self.wrong + self.debatable

    @property
    def unlabelled(self) -> int:
        return self.findings - self.labelled

    @property
    def strict(self) -> float | None:
        return self.right / self.labelled if self.labelled else None

    @property
    def lenient(self) -> float | None:
        return (self.right + self.debatable) / self.labelled if self.labelled else None

    @property
    def accepted_share(self) -> float | None:
        return self.accepted / self.labelled if self.labelled else None

    def add(self, label: str | None, accepted: bool = False) -> None:
        self.findings += 1
        if label in LABELS:
            setattr(self, label, getattr(self, label) + 1)
        self.accepted += accepted


def is_accepted(record: Record, label: Label | None) -> bool:
    """Right at the severity it has, or debatable at info where the label asks for info."""
    if label is None:
        return False
    if label.label == "right":
        return label.severity in (None, record.severity)
    return label.label == "debatable" and record.severity == "info" and label.severity == "info"


def tally(rows: Iterable[tuple[str, str | None] | tuple[str, str | None, bool]]) -> dict[str, Tally]:
    """(group, label or None[, accepted]) → a Tally per group, plus the group 'all'."""
    out: dict[str, Tally] = defaultdict(Tally)
    for row in rows:
        group, label = row[0], row[1]
        accepted = bool(row[2]) if len(row) > 2 else False
        out[group].add(label, accepted)
        out["all"].add(label, accepted)
    return dict(out)


def read_labels(paths: Path | Sequence[Path]) -> dict[str, Label]:
    """One labels file or several; a key labelled twice (in one file or across files) is an error."""
    labels: dict[str, Label] = {}
    for path in [paths] if isinstance(paths, Path) else paths:
        _read_labels_file(path, labels)
    return labels


def _read_labels_file(path: Path, labels: dict[str, Label]) -> None:
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            item = json.loads(text)
            if item.get("label") not in LABELS:
                raise ValueError(
                    f"{path}:{number}: label must be one of {', '.join(LABELS)}, not {item.get('label')!r}"
                )
            key = str(item["key"])
            if key in labels:
                raise ValueError(f"{path}:{number}: key labelled twice: {key}")
            labels[key] = Label(key, item["label"], str(item.get("reason", "")), item.get("severity"))


# -- output --------------------------------------------------------------------------------


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def print_table(title: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    print(f"\n{title}")
    for row in [list(header), *cells]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))


def print_counts(runs: Sequence[LintRun]) -> None:
    records = [r for run in runs for r in run.records]
    rules = sorted({r.rule for r in records})
    by_repo = Counter((r.repo, r.rule) for r in records)
    rows = [
        [run.repo, run.files, len(run.records), *(by_repo[(run.repo, rule)] or "" for rule in rules)] for run in runs
    ]
    totals = Counter(r.rule for r in records)
    rows.append(["all", sum(run.files for run in runs), len(records), *(totals[rule] for rule in rules)])
    print_table("Findings per repository and rule", ["repository", "files", "findings", *rules], rows)
    severity = Counter((r.rule, r.severity) for r in records)
    print_table(
        "Findings per rule and severity",
        ["rule", *SEVERITIES],
        [[rule, *(severity[(rule, s)] for s in SEVERITIES)] for rule in rules],
    )
    files, seconds = sum(run.files for run in runs), sum(run.seconds for run in runs)
    print(f"\n{files} files in {seconds:.1f} s = {files / seconds if seconds else 0:,.0f} files/s (lint wall time)")
    for run in runs:
        if run.error:
            print(f"ERROR {run.repo}: {run.error}")


def print_precision(records: Sequence[Record], labels: dict[str, Label]) -> None:
    def rows(groups: dict[str, Tally], order: Sequence[str]) -> list[list[object]]:
        return [
            [
                g,
                t.findings,
                t.labelled,
                t.right,
                t.debatable,
                t.wrong,
                percent(t.strict),
                percent(t.lenient),
                t.accepted,
                percent(t.accepted_share),
            ]
            for g in order
            if (t := groups.get(g))
        ]

    header = ["", "findings", "labelled", "right", "debatable", "wrong", "precision", "+debatable", "accepted", "acc%"]
    label_of = {r.key: labels[r.key].label if r.key in labels else None for r in records}
    ok = {r.key: is_accepted(r, labels.get(r.key)) for r in records}
    by_rule = tally((r.rule, label_of[r.key], ok[r.key]) for r in records)
    print_table("Precision per rule", ["rule", *header[1:]], rows(by_rule, [*sorted(by_rule.keys() - {"all"}), "all"]))
    by_severity = tally((r.severity, label_of[r.key], ok[r.key]) for r in records)
    print_table("Precision per severity", ["severity", *header[1:]], rows(by_severity, [*SEVERITIES, "all"]))
    by_repo = tally((r.repo, label_of[r.key], ok[r.key]) for r in records)
    print_table(
        "Precision per repository",
        ["repository", *header[1:]],
        rows(by_repo, [*sorted(by_repo.keys() - {"all"}), "all"]),
    )
    print_severity_disagreements(records, labels)
    print_vanished(records, labels)
    print_unlabelled(records, labels)


def print_unlabelled(records: Sequence[Record], labels: dict[str, Label], shown: int = 20) -> None:
    missing = [r for r in records if r.key not in labels]
    if missing:
        print(f"\nFindings without a label: {len(missing)}")
        for r in missing[:shown]:
            print(f"  {r.key}  {r.severity}  {r.message[:90]}")


def print_severity_disagreements(records: Sequence[Record], labels: dict[str, Label]) -> None:
    moved = Counter(
        (r.rule, r.severity, label.severity)
        for r in records
        if (label := labels.get(r.key)) and label.severity and label.severity != r.severity
    )
    if moved:
        print_table(
            "Severity the labels ask for, where it differs",
            ["rule", "now", "should be", "findings"],
            [[rule, now, want, n] for (rule, now, want), n in sorted(moved.items())],
        )


def print_vanished(records: Sequence[Record], labels: dict[str, Label], shown: int = 20) -> None:
    current = {r.key for r in records}
    gone = [label for key, label in labels.items() if key not in current]
    counts = Counter(label.label for label in gone)
    print(
        f"\nLabelled findings no longer reported: {len(gone)} "
        f"({', '.join(f'{counts[name]} {name}' for name in LABELS)})"
    )
    for label in [g for g in gone if g.label == "right"][:shown]:
        print(f"  lost true positive: {label.key}  ({label.reason})")


def write_jsonl(path: Path, items: Iterable[dict[str, Any]]) -> None:
    """Written beside the target and renamed into place, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            for item in items:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def dump_items(records: Sequence[Record], lines: SourceLines, around: int) -> Iterator[dict[str, Any]]:
    for r in sorted(records, key=lambda r: (r.repo, r.path, r.line, r.rule)):
        yield {
            "key": r.key,
            "repo": r.repo,
            "path": r.path,
            "line": r.line,
            "column": r.column,
            "rule": r.rule,
            "severity": r.severity,
            "message": r.message,
            "fix": r.fix,
            "context": lines.context(r, around),
        }


def expected_found(records: Sequence[Record], item: dict[str, Any]) -> bool:
    """An expected finding is found when a record has its repo, path and rule ("*": any rule) at
    its line (one line, or a list of lines any of which will do)."""
    lines = item["line"] if isinstance(item["line"], list) else [item["line"]]
    wanted = {int(n) for n in lines}
    return any(
        r.repo == item["repo"] and r.path == item["path"] and r.line in wanted and item["rule"] in ("*", r.rule)
        for r in records
    )


def print_expected(records: Sequence[Record], path: Path) -> None:
    with path.open(encoding="utf-8") as handle:
        wanted = [json.loads(t) for t in handle if t.strip()]
    print(f"\nExpected findings ({path}):")
    found = 0
    for item in wanted:
        ok = expected_found(records, item)
        found += ok
        where = f"{item['repo']}:{item['path']}:{item['line']}"
        print(f"  {'found ' if ok else 'MISSED'} {item['rule']} {where}  {item.get('why', '')[:80]}")
    print(f"  {found} found, {len(wanted) - found} missed")


# -- each file alone -----------------------------------------------------------------------


def lint_kind(name: str, parent: str) -> bool:
    """Whether lint reads a file of this name when it walks a folder (the kinds its help lists)."""
    lower = name.lower()
    return (
        lower.endswith((".py", ".pyw", ".ipynb", ".sh", ".bash"))
        or lower in ("dockerfile", "containerfile", "pyproject.toml")
        or lower.startswith(("dockerfile.", "containerfile."))
        or lower.endswith((".dockerfile", ".containerfile"))
        or (
            lower.endswith((".txt", ".in"))
            and ("requirements" in lower or "constraints" in lower or parent == "requirements")
        )
    )


def workflow_file(relative: str) -> bool:
    """CI workflows (`.github/workflows/*.yml`): listed too, so that --alone covers them once lint reads them."""
    return relative.startswith(".github/workflows/") and relative.endswith((".yml", ".yaml"))


def lintable_files(checkout: Path) -> list[str]:
    out = [
        Path(os.path.relpath(p, checkout)).as_posix()
        for p in sorted(glob.glob(os.path.join(checkout, ".github", "workflows", "*.y*ml")))
        if workflow_file(Path(os.path.relpath(p, checkout)).as_posix()) and os.path.isfile(p)
    ]
    for folder, dirs, files in os.walk(checkout):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in SKIP_DIRS
            and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))
        )
        for name in sorted(files):
            path = os.path.join(folder, name)
            if lint_kind(name, os.path.basename(folder)) and os.path.isfile(path) and not os.path.islink(path):
                out.append(Path(os.path.relpath(path, checkout)).as_posix())
    return out


def pick(files: Sequence[str], keep: set[str], limit: int | None) -> list[str]:
    """Files with whole-checkout findings, plus up to ``limit`` others spread evenly over the list."""
    others = [f for f in files if f not in keep]
    if limit is not None and len(others) > limit:
        step = len(others) / limit if limit else 0.0
        others = [others[int(i * step)] for i in range(limit)]
    return sorted(keep | set(others))


@dataclass
class AloneDiff:
    repo: str
    path: str
    only_whole: list[Record]
    only_alone: list[Record]


def unmatched(records: Sequence[Record], other: Sequence[Record]) -> list[Record]:
    """The records of ``records`` with no equal one left in ``other`` (a multiset difference)."""
    left = Counter(r.signature() for r in other)
    out = []
    for record in records:
        if left[record.signature()] > 0:
            left[record.signature()] -= 1
        else:
            out.append(record)
    return out


def diff_file(repo: str, path: str, whole: Sequence[Record], alone: Sequence[Record]) -> AloneDiff:
    return AloneDiff(repo, path, unmatched(whole, alone), unmatched(alone, whole))


def compare_alone(
    whole: LintRun, checkout: Path, backend: str, jobs: int, limit: int | None
) -> tuple[list[AloneDiff], int, float]:
    by_path: dict[str, list[Record]] = defaultdict(list)
    for r in whole.records:
        by_path[r.path].append(r)
    files = pick(lintable_files(checkout), set(by_path), limit)
    lint = BACKENDS[backend]
    start = time.perf_counter()

    def one(path: str) -> AloneDiff:
        run = lint(checkout, [path], 1, ALONE_TIMEOUT_S)
        if run.error:
            raise RuntimeError(f"{whole.repo}:{path}: {run.error}")
        return diff_file(whole.repo, path, by_path.get(path, []), run.records)

    workers = 1 if backend == "api" else (jobs or os.cpu_count() or 1)  # the API changes the working directory
    with ThreadPoolExecutor(max_workers=workers) as pool:
        diffs = [d for d in pool.map(one, files) if d.only_whole or d.only_alone]
    return diffs, len(files), time.perf_counter() - start


def print_alone(results: Sequence[tuple[list[AloneDiff], int, float]], shown: int) -> None:
    diffs = [d for result, _, _ in results for d in result]
    files, seconds = sum(n for _, n, _ in results), sum(s for _, _, s in results)
    print(
        f"\nEach file alone: {files} files in {seconds:.0f} s; "
        f"{len(diffs)} files get other findings than in the whole run"
    )
    whole = Counter(r.rule for d in diffs for r in d.only_whole)
    alone = Counter(r.rule for d in diffs for r in d.only_alone)
    rules = sorted(whole.keys() | alone.keys())
    print_table(
        "Findings that differ, per rule",
        ["rule", "only in whole run", "only alone"],
        [[rule, whole[rule], alone[rule]] for rule in rules],
    )
    for rule in rules:
        examples = [
            (d, r, side)
            for d in diffs
            for side, rs in (("whole", d.only_whole), ("alone", d.only_alone))
            for r in rs
            if r.rule == rule
        ]
        for d, r, side in examples[:shown]:
            print(f"  {rule} only {side}: {d.repo}:{d.path}:{r.line} [{r.severity}] {r.message[:100]}")


def alone_items(results: Sequence[tuple[list[AloneDiff], int, float]]) -> Iterator[dict[str, Any]]:
    for diffs, _, _ in results:
        for d in diffs:
            for side, rs in (("whole", d.only_whole), ("alone", d.only_alone)):
                for r in rs:
                    yield {
                        "repo": d.repo,
                        "path": d.path,
                        "only_in": side,
                        "rule": r.rule,
                        "line": r.line,
                        "severity": r.severity,
                        "message": r.message,
                    }


# -- the byte pre-filter ------------------------------------------------------------------


def check_prefilter(folders: Sequence[Path]) -> int:
    """Parse every Python file the pre-filter skips; report those that have a finding anyway."""
    from cuda_doctor.lint.engine import discover
    from cuda_doctor.lint.prefilter import needs_ast
    from cuda_doctor.lint.project import ProjectFinder
    from cuda_doctor.lint.python_ast import lint_source

    finder = ProjectFinder()
    files = skipped = missed = 0
    for folder in folders:
        for target in discover([folder]):
            if target.kind != "python" or target.problem:
                continue
            try:
                data = target.path.read_bytes()
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue  # reported as CDL000 by lint itself
            context = finder.context(target.path)
            relative = context.relative(target.path)
            files += 1
            if needs_ast(data, relative):
                continue
            skipped += 1
            try:
                hits = [h for h in lint_source(text, relative, context, data) if h.rule_id != "CDL000"]
            except (SyntaxError, ValueError, RecursionError):
                continue
            if hits:
                missed += 1
                print(f"  pre-filter skipped {target.path}: {', '.join(f'{h.rule_id}:{h.line}' for h in hits[:5])}")
    print(f"\nPre-filter: {files} Python files, {skipped} skipped, {missed} skipped with a finding")
    return missed


# -- main ----------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("corpus", type=Path, help="folder of checkouts, one sub-folder each")
    parser.add_argument("--repo", action="append", default=[], help="only this checkout (owner/name); repeatable")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="cli", help="how lint runs (default: cli)")
    parser.add_argument("-j", "--jobs", type=int, default=0, help="lint's --jobs for a whole checkout (0: one per CPU)")
    parser.add_argument("--dump", type=Path, metavar="FILE", help="write every finding as JSON lines, for labelling")
    parser.add_argument("--context", type=int, default=3, help="source lines each side of a finding in --dump")
    parser.add_argument(
        "--labels", type=Path, action="append", metavar="FILE", help="labels (JSON lines): print precision; repeatable"
    )
    parser.add_argument("--expected", type=Path, metavar="FILE", help="findings that should exist (JSON lines)")
    parser.add_argument("--alone", action="store_true", help="also lint each file alone and compare")
    parser.add_argument(
        "--check-prefilter", action="store_true", help="parse the files the byte pre-filter skips; list any finding"
    )
    parser.add_argument(
        "--alone-limit", type=int, metavar="N", help="--alone: at most N files without findings per checkout"
    )
    parser.add_argument("--alone-dump", type=Path, metavar="FILE", help="--alone: write the differences as JSON lines")
    parser.add_argument("--show", type=int, default=3, help="examples printed per rule for --alone (default 3)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    folders = checkouts(args.corpus, args.repo)
    if not folders:
        print(f"no checkouts under {args.corpus}", file=sys.stderr)
        return 2
    lint = BACKENDS[args.backend]
    runs = [lint(folder, ["."], args.jobs, LINT_TIMEOUT_S) for folder in folders]
    records = [r for run in runs for r in run.records]
    lines = SourceLines(args.corpus)
    assign_keys(records, lines.line)
    print_counts(runs)
    if args.dump:
        write_jsonl(args.dump, dump_items(records, lines, args.context))
        print(f"\n{len(records)} findings written to {args.dump}")
    if args.labels:
        print_precision(records, read_labels(args.labels))
    if args.expected:
        print_expected(records, args.expected)
    if args.check_prefilter and check_prefilter(folders):
        return 1
    if args.alone:
        results = [
            compare_alone(run, folder, args.backend, args.jobs, args.alone_limit)
            for run, folder in zip(runs, folders, strict=True)
            if not run.error
        ]
        print_alone(results, args.show)
        if args.alone_dump:
            write_jsonl(args.alone_dump, alone_items(results))
    return 1 if any(run.error for run in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())

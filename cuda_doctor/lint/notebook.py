"""Jupyter notebooks: code cells checked as Python once IPython's syntax is taken out (ipython.py),
shell lines and ``%%bash`` cells as shell; lines point into the JSON file."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, replace

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.ipython import PYTHON_CELL_MAGICS, SHELL_CELL_MAGICS, cell_magic, transform_cell
from cuda_doctor.lint.project import ProjectContext
from cuda_doctor.lint.python_ast import FileInfo, analyse
from cuda_doctor.lint.shell import check_command

# A cell of a documentation notebook that holds no code to run: a pasted output, a placeholder to fill
# in, a Markdown fence or doctest left by a converter.  Nobody means to run it; it cannot be checked.
PLACEHOLDER = re.compile(r"<[A-Za-z][\w\- .]*>|\.\.\.\s*\)|`{3,}|^\s*>>>")
PROSE_LINE = re.compile(r"^\s*[\"']?[A-Z][a-z]+[,:!]?( +[\w'’,!?.:;-]+){4,}")
LABEL_LINE = re.compile(r"^[A-Z]\w*: +\S+( +\S+){2,}")
REPR_OPEN = re.compile(r"^[A-Z]\w*\s*\{\s*$|^\w+\(.*\b(grad_fn|dtype|device)=")


class NotebookError(ValueError):
    """Not a notebook we can read (bad JSON, no cells list)."""


@dataclass
class _Cell:
    index: int
    lines: list[str]
    file_lines: list[int]  # the JSON file's line of each source line


def _cells(raw: str) -> list[_Cell]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise NotebookError(f"not valid JSON: {exc}") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("no 'cells' list: not a Jupyter notebook (nbformat 4)")
    raw_lines = raw.splitlines()
    cursor = -1  # the JSON line of the last source line placed
    out: list[_Cell] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        lines = [str(line) for line in (source if isinstance(source, list) else str(source).splitlines(keepends=True))]
        # a list item may hold several lines: one entry per line, so that line numbers hold
        split = [part for line in lines for part in (line.splitlines(keepends=True) or [line])]
        file_lines: list[int] = []
        for line in split:
            # searched after the line just placed ("x" is also in "x = f(x)"); one not found further on
            # shares the line (a cell source written as one string)
            found = _locate(raw_lines, cursor + 1, line)
            cursor = max(cursor, 0) if found is None else found
            file_lines.append(cursor + 1)
        out.append(_Cell(number, split, file_lines))
    return out


def _locate(raw_lines: list[str], start: int, line: str) -> int | None:
    """Index of the JSON line holding this source line, searching forward from ``start``."""
    needles = {json.dumps(line)[1:-1], json.dumps(line, ensure_ascii=False)[1:-1]}
    return next((i for i in range(start, len(raw_lines)) if any(n in raw_lines[i] for n in needles)), None)


def lint_notebook(raw: str, context: ProjectContext, path: str = "notebook.ipynb") -> list[Hit]:
    hits: list[Hit] = []
    python: list[str] = []
    mapping: list[int] = []  # combined python line (0-based) → JSON line
    cells = _cells(raw)
    for cell in cells:
        if not cell.lines:
            continue
        magic = cell_magic(cell.lines[0])
        lines, file_lines = cell.lines, cell.file_lines
        if magic is not None:
            if magic in SHELL_CELL_MAGICS:
                for text, file_line in zip(lines[1:], file_lines[1:], strict=True):
                    hits.extend(_relocate(check_command(text, 1), file_line))
            if magic not in PYTHON_CELL_MAGICS:
                continue  # another language (html, writefile, sql …): not Python
            lines = ["\n", *lines[1:]]
        transformed = transform_cell(lines)
        for index, command in transformed.commands:
            hits.extend(_relocate(check_command(command, 1), file_lines[index]))
        source = [line + "\n" for line in transformed.lines]
        try:
            ast.parse("".join(source))
        except SyntaxError as exc:
            if not not_code(transformed.lines, exc):
                line = file_lines[min(max((exc.lineno or 1) - 1, 0), len(file_lines) - 1)]
                reason = f"cell {cell.index}: syntax error: {exc.msg}; this cell was not checked"
                hits.append(Hit.make("CDL000", line, 1, reason=reason))
            continue
        python.extend(source)
        mapping.extend(file_lines)
    if python:
        tree = ast.parse("".join(python))
        # what the code cells say (not Markdown or outputs) is the evidence the rules read
        code = "".join(line for cell in cells for line in cell.lines)
        info = FileInfo(path, code.encode("utf-8", "surrogateescape"), notebook=True)
        hits += [
            replace(hit, line=mapping[min(hit.line - 1, len(mapping) - 1)]) for hit in analyse(tree, context, info)
        ]
    return hits


def not_code(lines: list[str], exc: SyntaxError) -> bool:
    line = lines[(exc.lineno or 1) - 1] if 0 < (exc.lineno or 0) <= len(lines) else ""
    if PLACEHOLDER.search(line) or any(re.search(r"`{3,}|<[A-Z][A-Z\-_ ]*>", other) for other in lines):
        return True
    if REPR_OPEN.search(line) or LABEL_LINE.match(line):
        return True
    # a line of pasted text at the start of a line
    pasted = (exc.msg or "").startswith("unterminated string literal")
    return pasted and bool(PROSE_LINE.match(line)) and line[:1] not in " \t"


def _relocate(hits: list[Hit], file_line: int) -> list[Hit]:
    return [replace(hit, line=file_line) for hit in hits]

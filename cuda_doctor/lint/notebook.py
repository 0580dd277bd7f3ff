"""Jupyter notebooks: code cells checked as Python once IPython's syntax is taken out (ipython.py),
shell lines and ``%%bash`` cells as shell; lines point into the JSON file."""

from __future__ import annotations

import ast
import bisect
import json
import json.decoder
import json.scanner
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


NEWLINE = re.compile("\n")


class NotebookError(ValueError):
    """Not a notebook we can read (bad JSON, no cells list)."""


@dataclass
class _Cell:
    index: int
    lines: list[str]
    file_lines: list[int]  # the JSON file's line of each source line


class _Placed(str):
    """A JSON string value that knows the offset, in the file, just past its closing quote."""

    end: int


def _parse_placed(raw: str) -> object:
    """``json.loads``, with every string value a ``_Placed``: where each source line is in the file is
    read from the parse itself, never searched for (a short line like ``x`` is also in Markdown, in
    outputs, in other cells)."""
    decoder = json.JSONDecoder()

    def parse_string(text: str, end: int, strict: bool = True) -> tuple[_Placed, int]:
        value, after = json.decoder.scanstring(text, end, strict)  # type: ignore[attr-defined]  # not in the stubs
        placed = _Placed(value)
        placed.end = after
        return placed, after

    decoder.parse_string = parse_string  # type: ignore[attr-defined]
    # the pure-Python scanner calls parse_string (the C one does not); neither is in the stubs
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder.decode(raw)


def _cells(raw: str) -> list[_Cell]:
    try:
        data = _parse_placed(raw)
    except ValueError as exc:
        raise NotebookError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise NotebookError("not valid JSON: nested too deeply") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("no 'cells' list: not a Jupyter notebook (nbformat 4)")
    newlines = [match.start() for match in NEWLINE.finditer(raw)]
    out: list[_Cell] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        items = source if isinstance(source, list) else [source]
        split: list[str] = []
        file_lines: list[int] = []
        for item in items:
            # a JSON string holds no raw newline: every line of one item is on the item's line of the file
            line = bisect.bisect_left(newlines, item.end) + 1 if isinstance(item, _Placed) else 1
            parts = str(item).splitlines(keepends=True) or [str(item)]
            split += parts
            file_lines += [line] * len(parts)
        out.append(_Cell(number, split, file_lines))
    return out


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

"""Jupyter notebooks: code cells checked as Python, ``!`` lines as shell; lines point into the JSON."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.python_ast import ProjectFlags, analyse
from cuda_doctor.lint.shell import check_command


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
        lines = source if isinstance(source, list) else str(source).splitlines(keepends=True)
        lines = [str(line) for line in lines]
        file_lines: list[int] = []
        for line in lines:
            # after the line just placed: a source line is also found inside the JSON line of
            # an earlier one that contains it ("x" in "x = f(x)"); one that is not found further
            # on shares the line (a cell source written as one string)
            found = _locate(raw_lines, cursor + 1, line)
            cursor = max(cursor, 0) if found is None else found
            file_lines.append(cursor + 1)
        out.append(_Cell(number, lines, file_lines))
    return out


def _locate(raw_lines: list[str], start: int, line: str) -> int | None:
    """Index of the JSON line holding this source line, searching forward from ``start``."""
    needles = {json.dumps(line)[1:-1], json.dumps(line, ensure_ascii=False)[1:-1]}
    for index in range(start, len(raw_lines)):
        if any(n in raw_lines[index] for n in needles):
            return index
    return None


def lint_notebook(raw: str, project: ProjectFlags) -> list[Hit]:
    hits: list[Hit] = []
    python: list[str] = []
    mapping: list[int] = []  # combined python line (0-based) → JSON line
    for cell in _cells(raw):
        first = cell.lines[0].strip() if cell.lines else ""
        if first.startswith("%%"):
            if first.startswith(("%%bash", "%%sh", "%%script")):
                for text, file_line in zip(cell.lines[1:], cell.file_lines[1:], strict=True):
                    hits.extend(_relocate(check_command(text, 1), file_line))
            continue
        cell_source: list[str] = []
        for text, file_line in zip(cell.lines, cell.file_lines, strict=True):
            stripped = text.strip()
            if stripped.startswith("!"):
                hits.extend(_relocate(check_command(stripped[1:], 1), file_line))
                cell_source.append("\n")
            elif stripped.startswith("%") or stripped.endswith("?"):
                cell_source.append("\n")  # IPython magics and help are not Python
            else:
                cell_source.append(text if text.endswith("\n") else text + "\n")
        try:
            ast.parse("".join(cell_source))
        except SyntaxError as exc:
            line = (
                cell.file_lines[min(max((exc.lineno or 1) - 1, 0), len(cell.file_lines) - 1)] if cell.file_lines else 1
            )
            hits.append(
                Hit.make(
                    "CDL000", line, 1, reason=f"cell {cell.index}: syntax error: {exc.msg}; this cell was not checked"
                )
            )
            continue
        python.extend(cell_source)
        mapping.extend(cell.file_lines)
    if python:
        tree = ast.parse("".join(python))
        for hit in analyse(tree, project):
            index = min(hit.line - 1, len(mapping) - 1)
            hits.append(_relocate([hit], mapping[index])[0])
    return hits


def _relocate(hits: list[Hit], file_line: int) -> list[Hit]:
    return [Hit(h.rule_id, file_line, h.column, h.captures, None, None, h.severity) for h in hits]

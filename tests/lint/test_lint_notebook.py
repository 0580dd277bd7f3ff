"""Notebook findings point at the line of the .ipynb file that holds the code."""

from __future__ import annotations

import json

from cuda_doctor.lint.notebook import lint_notebook
from cuda_doctor.lint.project import ProjectContext

SOURCE = [
    "import torch\n",
    "ctx = torch.cuda.amp.autocast()\n",
    "torch.cuda.amp.autocast()\n",  # also found inside the JSON line above it
]


def _notebook(source: object) -> str:
    cell = {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


def _lines(raw: str) -> list[tuple[int, str]]:
    return [(hit.line, hit.rule_id) for hit in lint_notebook(raw, ProjectContext())]


def test_a_line_contained_in_the_one_above_points_at_its_own_json_line() -> None:
    raw = _notebook(SOURCE)
    rows = raw.splitlines()
    expected = [i + 1 for i, row in enumerate(rows) if "autocast" in row]
    assert len(expected) == 2
    assert [line for line, rule in _lines(raw) if rule == "CDL001"] == expected


def test_a_cell_written_as_one_string_points_at_that_string() -> None:
    raw = _notebook("".join(SOURCE))
    [row] = [i + 1 for i, text in enumerate(raw.splitlines()) if "autocast" in text]
    assert [line for line, rule in _lines(raw) if rule == "CDL001"] == [row, row]


def _long_notebook() -> tuple[str, list[int]]:
    """Forty code cells between Markdown cells that repeat their lines, with outputs that repeat them
    too; every code cell's source is a list of lines, some items holding two lines; the last cell is one
    string. Returns the file and the 1-based file line of every deprecated call."""
    cells: list[dict[str, object]] = []
    for n in range(40):
        cells.append({"cell_type": "markdown", "metadata": {}, "source": ["## step\n", "\n", "x = 1\n", "y = x\n"]})
        source = ["x = 1\n", "\n", "y = x\n", f"z = {n}\n  # two lines in one item\n"]
        if n % 7 == 3:
            source.append("s = torch.cuda.amp.GradScaler()\n")
        output = {"output_type": "stream", "name": "stdout", "text": ["x = 1\n", "y = x\n"]}
        cells.append({"cell_type": "code", "metadata": {}, "execution_count": n, "outputs": [output], "source": source})
    cells.append(
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": "x = 1\ns = torch.cuda.amp.GradScaler()\n"}
    )
    raw = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    rows = [i + 1 for i, text in enumerate(raw.splitlines()) if "GradScaler" in text]
    return raw, rows


def test_findings_of_a_long_notebook_point_at_their_own_lines() -> None:
    raw, rows = _long_notebook()
    assert len(rows) == 7
    assert [line for line, rule in _lines(raw) if rule == "CDL001"] == rows


def test_findings_point_at_their_lines_in_a_compact_notebook() -> None:
    # written without indentation: the whole notebook is one line of JSON
    raw, _ = _long_notebook()
    compact = json.dumps(json.loads(raw))
    assert [line for line, rule in _lines(compact) if rule == "CDL001"] == [1] * 7


def test_percent_formatting_continued_on_a_new_line_is_python_not_a_magic() -> None:
    source = [
        "import torch\n",
        "label = ('%s of %s'\n",
        "         % (1, 2))\n",
        "text = 'step %d' \\\n",
        "% 3\n",
        "%matplotlib inline\n",
        "s = torch.cuda.amp.GradScaler()\n",
    ]
    found = _lines(_notebook(source))
    assert [rule for _, rule in found] == ["CDL001"]  # no CDL000: the cell was read as Python

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

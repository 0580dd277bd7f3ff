"""Shell scripts: deprecated launchers and torch pins in ``pip install`` lines."""

from __future__ import annotations

import re
from collections.abc import Iterator

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.requirements import lint_command

LAUNCH_RE = re.compile(r"-m\s+torch\.distributed\.launch\b")


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, command) with backslash continuations joined and comment lines dropped."""
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not buffer:
            start = number
        if raw.lstrip().startswith("#"):
            if buffer:
                continue  # a comment inside a continued command
            yield number, ""
            continue
        if raw.endswith("\\"):
            buffer.append(raw[:-1])
            continue
        buffer.append(raw)
        yield start, " ".join(buffer)
        buffer = []
    if buffer:
        yield start, " ".join(buffer)


def check_command(command: str, line: int, column: int = 1) -> list[Hit]:
    hits: list[Hit] = []
    match = LAUNCH_RE.search(command)
    if match:
        hits.append(Hit.make("CDL006", line, column, command="python -m torch.distributed.launch"))
    hits.extend(lint_command(command, line))
    return hits


def lint_shell(text: str) -> list[Hit]:
    hits: list[Hit] = []
    for number, command in logical_lines(text):
        if command.strip():
            hits.extend(check_command(command, number))
    return hits

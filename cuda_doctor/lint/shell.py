"""Shell scripts: deprecated launchers and torch pins in ``pip install`` lines."""

from __future__ import annotations

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.python_ast import LAUNCH_RE
from cuda_doctor.lint.requirements import lint_command, logical_lines


def check_command(command: str, line: int, column: int = 1) -> list[Hit]:
    hits: list[Hit] = []
    match = LAUNCH_RE.search(command)
    if match:
        hits.append(Hit.make("CDL006", line, column, command="python -m torch.distributed.launch"))
    hits.extend(lint_command(command, line))
    return hits


def lint_shell(text: str) -> list[Hit]:
    # the same logical lines as a requirements file: continuations joined, and a comment (a
    # whole line, or " #" to the end) is never read as part of a command
    hits: list[Hit] = []
    for number, command in logical_lines(text):
        if command.strip():
            hits.extend(check_command(command, number))
    return hits

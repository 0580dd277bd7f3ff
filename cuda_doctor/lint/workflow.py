"""CI workflows (``.github/workflows/*.yml``): the ``run:`` steps (one line, or a ``|``/``>`` block scalar)
are checked like shell scripts, with no YAML library."""

from __future__ import annotations

import re
from dataclasses import replace

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.shell import lint_shell

RUN_KEY = re.compile(r"^(?P<indent>\s*)(?:-\s+)?run:\s*(?P<value>.*)$")
BLOCK = re.compile(r"^[|>][-+]?\d*\s*(#.*)?$")


def run_steps(text: str) -> list[tuple[int, str]]:
    """(line of the first command line, the step's script) for every ``run:`` step."""
    lines = text.splitlines()
    out: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        match = RUN_KEY.match(lines[index])
        index += 1
        if match is None:
            continue
        value = match.group("value").strip()
        if value and not BLOCK.match(value):
            out.append((index, _unquote(value)))
            continue
        key_indent = len(match.group("indent")) + (2 if lines[index - 1].lstrip().startswith("-") else 0)
        start = index + 1
        body: list[str] = []
        block_indent: int | None = None
        while index < len(lines):
            line = lines[index]
            if line.strip():
                indent = len(line) - len(line.lstrip())
                if indent <= key_indent:
                    break
                if block_indent is None:
                    block_indent = indent
                body.append(line[block_indent:] if indent >= block_indent else line.lstrip())
            else:
                body.append("")
            index += 1
        out.append((start, "\n".join(body)))
    return out


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return re.sub(r"\s+#.*$", "", value)


def lint_workflow(text: str) -> list[Hit]:
    return [replace(hit, line=hit.line + start - 1) for start, script in run_steps(text) for hit in lint_shell(script)]

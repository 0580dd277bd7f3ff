"""Shell scripts: deprecated launchers and torch pins in ``pip install`` lines; simple ``NAME=value``
assignments are expanded in later lines (``L=torch.distributed.launch``, then ``python -m $L``)."""

from __future__ import annotations

import re

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.pyscan import LAUNCH_RE
from cuda_doctor.lint.requirements import lint_command, logical_lines

ASSIGNMENT = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+)?(?P<name>[A-Za-z_]\w*)=(?P<value>.*)$")
REFERENCE = re.compile(r"\$\{(?P<braced>[A-Za-z_]\w*)\}|\$(?P<bare>[A-Za-z_]\w*)")
LAUNCHER = "python -m torch.distributed.launch"
# Commands that print their arguments: a launcher named there is an instruction for a person, not a use.
PRINTING = frozenset({"echo", "printf"})
SEPARATOR = re.compile(r"&&|\|\||[;|&()]")
ENV_PREFIX = re.compile(r"^(?:[A-Za-z_]\w*=\S*\s+)+")


def simple_commands(command: str) -> list[str]:
    """The simple commands of a line, split at ``;``, ``&&``, ``||``, ``|``, ``&`` and parentheses
    outside quotes (an approximation of the shell's grammar: enough to find the command word)."""
    parts: list[str] = []
    quote = ""
    start = index = 0
    while index < len(command):
        char = command[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "\\":
            index += 1
        elif separator := SEPARATOR.match(command, index):
            parts.append(command[start:index])
            start = index = separator.end()
            continue
        index += 1
    parts.append(command[start:])
    return [part.strip() for part in parts if part.strip()]


def runs_launcher(command: str) -> bool:
    """The launcher in a command that runs it (or sets a variable to it), not in ``echo``'s words."""
    for simple in simple_commands(command):
        if not LAUNCH_RE.search(simple):
            continue
        words = ENV_PREFIX.sub("", simple).split(None, 1)
        if words and words[0] not in PRINTING:
            return True
    return False


def check_command(command: str, line: int) -> list[Hit]:
    launch = [Hit.make("CDL006", line, command=LAUNCHER)] if runs_launcher(command) else []
    return launch + lint_command(command, line)


def _value(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw.split(" ", 1)[0] if raw and raw[0] not in "\"'" else raw.strip("\"'")


def lint_shell(text: str) -> list[Hit]:
    # the same logical lines as a requirements file: continuations joined, comments removed
    hits: list[Hit] = []
    variables: dict[str, str] = {}
    for number, command in logical_lines(text):
        if not command.strip():
            continue
        line_hits = check_command(command, number)
        hits.extend(line_hits)
        if not any(h.rule_id == "CDL006" for h in line_hits) and "$" in command:
            hits.extend(_expanded_launch(command, number, variables))
        if assignment := ASSIGNMENT.match(command):
            variables[assignment.group("name")] = _value(assignment.group("value"))
    return hits


def _expanded_launch(command: str, line: int, variables: dict[str, str]) -> list[Hit]:
    used = [m.group("braced") or m.group("bare") for m in REFERENCE.finditer(command)]
    values = [variables[name] for name in used if name in variables]
    if not values or any(LAUNCH_RE.search(value) for value in values):
        return []  # nothing known, or reported where the variable was set
    expanded = REFERENCE.sub(lambda m: variables.get(m.group("braced") or m.group("bare"), m.group(0)), command)
    return [Hit.make("CDL006", line, 1, command=LAUNCHER)] if runs_launcher(expanded) else []

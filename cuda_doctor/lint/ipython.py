"""IPython's cell syntax turned into Python with the same line numbers, and the shell commands it runs.

``%magic``, ``!shell``, ``x = !cmd``, ``obj?`` and automagic lines become ``pass`` (a magic that is the
only statement of an ``if`` body still leaves valid Python); prompts and a cell's indentation are removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Line magics and default aliases that IPython runs without the % (automagic is on by default).
AUTOMAGIC = frozenset({
    "alias", "autoreload", "bookmark", "cat", "cd", "conda", "config", "cp", "dhist", "env",
    "history", "less", "ll", "load_ext", "ls", "lsmagic", "man", "matplotlib", "mkdir", "more",
    "mv", "pdb", "pip", "popd", "pushd", "pwd", "pycat", "reload_ext", "rm", "rmdir", "run",
    "set_env", "store", "sx", "system", "tensorboard", "time", "timeit", "who", "whos", "xmode",
})  # fmt: skip
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "skip"})
SHELL_CELL_MAGICS = frozenset({"bash", "sh", "script", "shell"})

CLASSIC_START = re.compile(r"^>>>( |$)")
CLASSIC_PROMPT = re.compile(r"^(>>>|\.\.\.)( |$)")
IPYTHON_START = re.compile(r"^In \[\d+\]: ")
IPYTHON_PROMPT = re.compile(r"^(In \[\d+\]: |\s*\.\.\.+: ?)")
HELP = re.compile(r"^\s*(\?{1,2}[\w.]+|[\w.]+(\(\))?\?{1,2})\s*$")
ASSIGN_ESCAPE = re.compile(r"^(\s*)([\w.,\s\[\]]+?)\s*=\s*[!%]")
MAGIC_NAME = re.compile(r"[A-Za-z_]")  # after the %: a magic's name (``% (a, b)`` is Python's operator)
AUTOMAGIC_LINE = re.compile(r"^\s*(?P<word>[A-Za-z_]\w*)\s+(?P<rest>\S.*)$")
NOT_MAGIC_REST = re.compile(
    r"^(=(?!=)|[+\-*/%&|^@]=|\*\*=|//=|<<=|>>=|[(\[,:;)\]]|\.(?![./])|if\b|else\b|for\b|in\b|and\b|or\b|is\b)"
)  # what follows a name in Python, not the argument of a magic (``cd ..`` and ``ls ./data`` are magics)


@dataclass
class Transformed:
    lines: list[str]  # Python, one per cell line
    commands: list[tuple[int, str]] = field(default_factory=list)  # (cell line index, shell command)


def _strip_prompts(lines: list[str]) -> list[str]:
    first = next((line for line in lines if line.strip()), "")
    if CLASSIC_START.match(first):
        return [CLASSIC_PROMPT.sub("", line, count=1) for line in lines]
    if IPYTHON_START.match(first):
        return [IPYTHON_PROMPT.sub("", line, count=1) for line in lines]
    if indent := re.match(r"^[ \t]+", first):
        return [line[indent.end() :] if line.startswith(indent.group(0)) else line for line in lines]
    return lines


def transform_cell(raw_lines: list[str]) -> Transformed:
    """The cell's lines (without their newlines) as Python, plus the shell commands it runs."""
    lines = _strip_prompts([line.rstrip("\r\n") for line in raw_lines])
    out = Transformed(list(lines))
    in_string = False
    depth = 0  # brackets left open by the Python lines so far
    continued = False  # the previous Python line ends with a backslash
    index = 0
    while index < len(lines):
        line = lines[index]
        # IPython's syntax starts a logical line only: `% (a, b)` inside brackets is Python's % operator
        command = None if in_string or depth > 0 or continued else _escaped(line)
        if command is None:
            if (line.count('"""') + line.count("'''")) % 2 == 1:  # opens or closes a string
                in_string = not in_string
            elif not in_string:
                depth = _bracket_depth(line, depth)
                continued = line.rstrip().endswith("\\") and not line.lstrip().startswith("#")
            index += 1
            continue
        text, replacement = command
        out.lines[index] = replacement
        first = index
        # a command continues on the next line after a trailing backslash
        while text.endswith("\\") and index + 1 < len(lines):
            index += 1
            text = text[:-1] + " " + lines[index].strip()
            out.lines[index] = ""
        if text:
            out.commands.append((first, text))
        index += 1
    return out


def _bracket_depth(line: str, depth: int) -> int:
    """The bracket depth after this line: brackets in its strings and comment do not count."""
    quote = ""
    index = 0
    while index < len(line):
        char = line[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        index += 1
    return depth


def _escaped(line: str) -> tuple[str, str] | None:
    """(shell command or '', the Python that stands for the line) for IPython syntax, else None."""
    stripped = line.strip()
    pad = line[: len(line) - len(line.lstrip())]  # the line's indentation
    if not stripped:
        return None
    if stripped.startswith("!"):
        return stripped.lstrip("!").strip(), f"{pad}pass"
    if stripped.startswith("%%") or HELP.match(line):
        return "", f"{pad}pass"  # help, or a cell magic below the first line (IPython rejects it)
    if stripped.startswith("%") and MAGIC_NAME.match(stripped, 1):
        return _magic_command(stripped[1:]), f"{pad}pass"
    assign = ASSIGN_ESCAPE.match(line)
    if assign and not stripped.startswith(("if ", "while ", "return ")):
        rest = line[assign.end() - 1 :]
        command = rest[1:].strip() if rest.startswith("!") else _magic_command(rest[1:])
        return command, f"{pad}{assign.group(2).strip()} = None"
    match = AUTOMAGIC_LINE.match(line)
    if match and match.group("word") in AUTOMAGIC and not NOT_MAGIC_REST.match(match.group("rest")):
        return _magic_command(stripped), f"{pad}pass"
    return None


def _magic_command(text: str) -> str:
    """The shell command a line magic runs (``%pip``, ``%conda``, ``%run``, ``%sx``, ``%system``), else ''."""
    word, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    if word in ("pip", "conda"):
        return f"{word} {rest}"
    if word == "run":
        return f"python {rest}"
    if word in ("sx", "system"):
        return rest
    return ""


def cell_magic(first_line: str) -> str | None:
    """The name of a ``%%magic`` that starts the cell, else None."""
    stripped = first_line.strip()
    if not stripped.startswith("%%"):
        return None
    return stripped[2:].split(None, 1)[0] if len(stripped) > 2 else ""

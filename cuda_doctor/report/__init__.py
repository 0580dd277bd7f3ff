"""Reporters: the only code that turns reports into output.  Every format returns a string;
only the commands write it to stdout or a file.

One package or module per report type, each with its one format name → renderer table:
``check`` (check, smoke, exec), ``facts``, ``compare`` (diff and fleet), ``watch`` and ``rules``
(rules, explain, the generated reference).  ``progress`` is the transient line on a terminal
while probes run.  What the types share lives here.
"""

from __future__ import annotations

import re

#: Characters a terminal acts on instead of showing, each with its visible escape: C0 (ESC
#: starts CSI and OSC sequences, BEL ends an OSC title), DEL, C1 (0x9b is a one-byte CSI), the
#: line separators and the bidi controls that reorder what is shown.  A table for str.translate:
#: built in microseconds at start-up, where compiling a pattern costs a millisecond.
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x61C, 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _CONTROLS}


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object, *, ascii_only: bool = False) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``, a newline
    too), so that a string from outside (an environment variable, a saved report, a rule file)
    is shown and never acted on.  Every text and Markdown reporter puts such strings through
    here; ``ascii_only`` escapes everything outside printable ASCII as well (the one-line format).
    """
    if ascii_only:
        return re.sub("[^\\x20-\\x7e]", _escaped, str(text))
    return str(text).translate(_ESCAPES)


def md_cell(text: object) -> str:
    """Text that stays inside one Markdown table cell."""
    return printable(str(text).replace("|", "\\|").replace("\n", " "))


def count(n: int, one: str, many: str | None = None) -> str:
    """``count(1, "node")`` → "1 node", ``count(2, "node")`` → "2 nodes"."""
    return f"{n} {one if n == 1 else many or one + 's'}"

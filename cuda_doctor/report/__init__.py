"""Reporters: the only code that turns reports into output.  Every format returns a string;
only the commands write it to stdout or a file.

One package or module per report type, each with its one format name → renderer table:
``check`` (check, smoke, exec), ``facts``, ``compare`` (diff and fleet), ``watch`` and ``rules``
(rules, explain, the generated reference).  ``progress`` is the transient line on a terminal
while probes run.  What the types share lives here.
"""

from __future__ import annotations

import re

#: Characters a terminal acts on instead of showing: C0 (ESC starts CSI and OSC sequences, BEL
#: ends an OSC title), DEL, C1 (0x9b is a one-byte CSI), the line separators and the bidi
#: controls that reorder what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NOT_ASCII = re.compile("[^\x20-\x7e]")
_NOT_ASCII_BUT_NEWLINE = re.compile("[^\x20-\x7e\n]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object, *, keep_newlines: bool = False, ascii_only: bool = False) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``), so that a
    string from outside (an environment variable, a saved report, a rule file) is shown and
    never acted on.  Every text and Markdown reporter puts such strings through here.

    ``keep_newlines``: for text that is ours to break into lines (a rule's rationale);
    ``ascii_only``: escape everything outside printable ASCII too (the one-line format).
    """
    if ascii_only:
        pattern = _NOT_ASCII_BUT_NEWLINE if keep_newlines else _NOT_ASCII
    else:
        pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL
    return pattern.sub(_escaped, str(text))


def md_cell(text: object) -> str:
    """Text that stays inside one Markdown table cell."""
    return printable(str(text).replace("|", "\\|").replace("\n", " "))


def count(n: int, one: str, many: str | None = None) -> str:
    """``count(1, "node")`` → "1 node", ``count(2, "node")`` → "2 nodes"."""
    return f"{n} {one if n == 1 else many or one + 's'}"

"""Reporters: the only code that turns reports into output.  Every format returns a string;
only the commands write it.  One package or module per report type; what they share is here."""

from __future__ import annotations

import json
import re

#: Characters a terminal acts on instead of showing: C0 (ESC, BEL), DEL, C1 (0x9b is a one-byte
#: CSI), the line separators and the bidi controls that reorder what is shown.
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x61C, 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A)]


def _escape(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_ESCAPES = {code: _escape(code) for code in _CONTROLS}


def printable(text: object, *, ascii_only: bool = False) -> str:
    """``text`` with every control character (a newline too) shown as an escape, never acted on;
    ``ascii_only`` escapes everything outside printable ASCII as well (the one-line format)."""
    if ascii_only:
        return re.sub("[^\\x20-\\x7e]", lambda match: _escape(ord(match.group())), str(text))
    return str(text).translate(_ESCAPES)


#: What Markdown and the HTML inside it would act on: tags and entities, emphasis, code spans,
#: links and images, tables, strikethrough, and the @mentions and autolinks of GitHub.
_MD_ESCAPES = {
    **{ord(c): f"\\{c}" for c in "\\`*_[]|~!#"},
    ord("<"): "&lt;", ord(">"): "&gt;", ord("&"): "&amp;", ord("@"): "&#64;",
}  # fmt: skip


def md_text(text: object) -> str:
    """A string from outside as Markdown that shows it and does nothing else: no tag, link, mention or emphasis."""
    return printable(text).translate(_MD_ESCAPES).replace("://", "&#58;//")  # no autolink either


def origin_note(origin: str) -> str:
    """What a result of a rule from a ``rules-dirs`` folder says of itself."""
    return f"a rule from {origin}, not cuda-doctor's: its words and commands are that folder's"


def md_code(lines: list[str]) -> list[str]:
    """A fenced code block whose fence no backtick run in ``lines`` can close."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}sh", *(printable(line) for line in lines), fence]


class Markup(str):
    """Markdown that cuda-doctor wrote itself (``**worse**``): a table cell keeps it as it is."""


def md_cell(text: object) -> str:
    """Text kept inside one Markdown table cell: ``Markup`` as it is, anything else through ``md_text``."""
    if isinstance(text, Markup):
        return printable(text.replace("|", "\\|").replace("\n", " "))
    return md_text(str(text).replace("\n", " "))


def value_text(value: object) -> str:
    """A fact's value as shown: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def count(n: int, one: str, many: str | None = None) -> str:
    """``count(1, "node")`` → "1 node", ``count(2, "node")`` → "2 nodes"."""
    return f"{n} {one if n == 1 else many or one + 's'}"

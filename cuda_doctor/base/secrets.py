"""Secrets kept out of every report and log: credentials in URLs, secret-named variables, and
the values of secret-looking command-line options."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

HIDDEN = "***"
#: ``scheme://user:password@host`` and ``scheme://token@host``: the part before "@" goes.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
#: ``--api-key``, ``--hf_token``, ``-password``: an option whose value is a secret.
_SECRET_OPTION = re.compile(r"(?i)^--?[\w-]*(token|secret|password|passwd|api[-_]?key|credential|auth)[\w-]*$")


def is_secret_name(name: str) -> bool:
    """An environment variable (or option) whose value is a secret by its name."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def redact(text: str) -> str:
    """``text`` without the credentials of any URL in it."""
    return _URL_CREDENTIALS.sub(rf"\1{HIDDEN}@", text) if "@" in text else text


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line without secrets: ``--api-key=X`` and ``--api-key X`` lose X, URLs their credentials."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(HIDDEN)
            hide_next = False
            continue
        option, equals, _value = word.partition("=")
        if _SECRET_OPTION.match(option):
            if equals:
                out.append(f"{option}={HIDDEN}")
                continue
            hide_next = True
        out.append(redact(word))
    return out


def redact_value(value: Any) -> Any:
    """A fact's value without URL credentials, in strings at any depth of lists and objects."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return {key: HIDDEN if is_secret_name(str(key)) else redact_value(item) for key, item in value.items()}
    return value

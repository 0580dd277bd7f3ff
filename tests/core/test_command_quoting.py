"""Every command a fix prints runs exactly what it shows: each fact put into it is shell-quoted.

For every command of every rule, the facts it names are given hostile values (spaces, quotes,
``$(…)``, backticks, ``;``, newlines); ``shlex.split`` of the printed command must then be the
intended argv, word for word.
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.rules import _PLACEHOLDER, _commands, is_command_fact, load_rules

HOSTILE = [
    "/opt/my env/bin/python",
    "/tmp/ve $(touch PWNED)/bin/python",
    "`id`",
    "a;rm -rf ~",
    'it\'s "quoted"',
    "line\nbreak",
    "$HOME && echo owned",
    "",
]
#: A whole command another part built from an argv, as derivers do (shlex.join).
COMMAND_ARGV = ["/tmp/ve $(touch PWNED)/bin/python", "-m", "pip", "install", "torch==2.11.0"]


def _templates() -> list[tuple[str, str]]:
    return sorted({(rule.id, command) for rule in load_rules() for o in rule.outcomes for command in o.commands})


def intended(template: str, value: str) -> list[str]:
    """The argv a template means: its words, with each plain fact one word (or inside one), each
    command fact its own argv."""
    markers: dict[str, str] = {}

    def mark(match: object) -> str:
        name = match.group(1)  # type: ignore[attr-defined]
        key = f"@@{len(markers)}@@"
        markers[key] = name
        return key

    words = shlex.split(_PLACEHOLDER.sub(mark, template))
    argv: list[str] = []
    for word in words:
        whole = markers.get(word)
        if whole is not None and is_command_fact(whole):
            argv.extend(COMMAND_ARGV)
            continue
        for key in markers:
            word = word.replace(key, value)
        argv.append(word)
    return argv


def render(template: str, value: str) -> str:
    facts = Facts()
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        facts.set(name, shlex.join(COMMAND_ARGV) if is_command_fact(name) else value)
    commands, missing = _commands((template,), facts, lambda name: name)
    assert missing is None
    return commands[0]


@pytest.mark.parametrize(("rule_id", "template"), _templates())
@pytest.mark.parametrize("value", HOSTILE)
def test_every_printed_command_is_the_intended_argv(rule_id: str, template: str, value: str) -> None:
    printed = render(template, value)
    assert shlex.split(printed) == intended(template, value), f"{rule_id}: {printed}"


@settings(max_examples=200, deadline=None)
@given(value=st.text(min_size=1, max_size=40))
def test_any_fact_value_stays_one_word(value: str) -> None:
    printed = render("nvidia-smi -q -i {gpu.index}", value)
    assert shlex.split(printed) == ["nvidia-smi", "-q", "-i", value]

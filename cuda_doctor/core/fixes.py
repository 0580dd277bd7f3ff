"""What fixes print: the commands a user pastes."""

from __future__ import annotations

import shlex

from cuda_doctor.core.facts import Facts

#: Where the inspected interpreter is named: the framework probe's, else the smoke run's.
PYTHON_FACTS = ("framework.python", "jax.python", "smoke.python")


def pip_of(facts: Facts) -> str:
    """How every fix runs pip for the inspected interpreter: ``framework.pip`` (which knows
    whether plain ``pip`` is that interpreter's), else ``<python> -m pip`` with the interpreter a
    probe ran (quoted), else ``python3 -m pip`` (Debian and Ubuntu have no ``python`` command
    unless a package adds it)."""
    pip = facts.get("framework.pip")
    if isinstance(pip, str) and pip:
        return pip
    python = next((facts.get(name) for name in PYTHON_FACTS if facts.get(name)), None)
    if not python:
        return "python3 -m pip"
    return f"{shlex.quote(str(python))} -m pip"

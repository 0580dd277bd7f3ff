"""Options shared by several commands, defined once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cuda_doctor.base.errors import UserError

if TYPE_CHECKING:
    from cuda_doctor.core.facts import Facts
    from cuda_doctor.core.interpreter import Interpreter

F = TypeVar("F", bound=Callable[..., Any])


class Seconds(click.FloatRange):
    """A duration in seconds within [low, high]; unlike FloatRange, NaN is refused too."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:  # NaN compares unequal to itself and slips through range checks
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return number


def _split(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Accept ``--select CD1,CD2`` as well as repeated ``--select CD1 --select CD2``."""
    return tuple(part.strip().upper() for item in value for part in item.split(",") if part.strip())


def selection_options(ignored: str, selected: str, categories: str = "") -> Callable[[F], F]:
    """``--select`` and ``--ignore``, their help naming examples the command accepts."""
    also = f"; categories: {categories}" if categories else ", or categories"

    def decorate(func: F) -> F:
        for name, help in (
            (
                "--ignore",
                f"Skip these rules (ids, id prefixes such as {ignored}{also}). Repeatable or comma-separated.",
            ),
            ("--select", f"Run only these rules (ids, id prefixes such as {selected}{also})."),
        ):
            func = click.option(name, multiple=True, callback=_split, metavar="RULE", help=help)(func)
        return func

    return decorate


#: The environment checks' selection (``check``, ``smoke``…): their ids are CDnnn.
selection = selection_options("CD5", "CD1")
#: The lint checks' selection: their ids are CDLnnn.
lint_selection = selection_options("CDL0", "CDL1", "code, docker, dependencies")


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A TOML file with [tool.cuda-doctor] settings (default: the nearest pyproject.toml).",
)


def severity_option(help: str) -> Callable[[F], F]:
    """``--fail-on``: the lowest severity that counts as a failure."""
    return click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default=None, help=help)


fail_on_option = severity_option("Lowest severity that makes the exit code 1 (default: error, or fail-on from config).")


def format_option(choices: Iterable[str], help: str = "Output format.") -> Callable[[F], F]:
    """The one ``--format`` option: ``choices`` are the names in the report type's format table."""
    return click.option(
        "--format", "fmt", type=click.Choice(list(choices)), default="text", show_default=True, help=help
    )


def timeout_option(help: str) -> Callable[[F], F]:
    return click.option("--timeout", type=Seconds(0.5, 600), default=10.0, show_default=True, help=help)


def smoke_timeout_option(help: str) -> Callable[[F], F]:
    return click.option("--smoke-timeout", type=Seconds(1, 3600), default=30.0, show_default=True, help=help)


#: What ``--python`` defaults to where ``inspected_python`` chooses: said once for those commands.
PYTHON_DEFAULT = (
    " Default: cuda-doctor's own interpreter when it has torch, TensorFlow or JAX, else the first that"
    " has one of the activated venv or conda environment and python3/python on PATH."
)


def python_option(help: str) -> Callable[[F], F]:
    return click.option("--python", "python", type=click.Path(dir_okay=False), default=None, help=help)


def inspected_python(python: str | None, timeout: float) -> Interpreter:
    """The interpreter whose framework is inspected: ``--python`` (checked to be one), else
    cuda-doctor's own when it has a framework, else the one the user trains with, when found."""
    import os
    import sys

    from cuda_doctor.core.interpreter import choose, frameworks_here

    return choose(
        python,
        running=sys.executable,
        running_prefix=sys.prefix,
        env=os.environ,
        timeout=timeout,
        running_frameworks=frameworks_here() if python is None else None,
    )


def record_interpreter(facts: Facts, chosen: Interpreter | None) -> None:
    """The interpreter chosen and why, as facts of the report; nothing under --fast, which chose
    none (and imports none of the search)."""
    if chosen is None:
        return
    from cuda_doctor.core.interpreter import record

    record(facts, chosen)


def refuse_fast_python(fast: bool, python: str | None) -> None:
    """--fast never imports a framework: with --python the interpreter would go unchecked."""
    if fast and python is not None:
        raise UserError(
            "--python cannot be combined with --fast: --fast does not import the framework, "
            "so the interpreter would not be checked (drop --fast to judge it)"
        )


def file_option(*names: str, help: str, callback: Any = None) -> Callable[[F], F]:
    """A report file to read (``--facts``) or write (``--save``, ``--output``)."""
    return click.option(*names, type=click.Path(path_type=Path, dir_okay=False), callback=callback, help=help)


def jobs_option(help: str) -> Callable[[F], F]:
    """``--jobs N``: worker processes; 0 lets the command choose from the CPUs and the work."""
    return click.option("--jobs", "-j", type=click.IntRange(0, 256), default=0, show_default=True, help=help)


def noise_option(default: float, help: str) -> Callable[[F], F]:
    # the default as a string, so the help shows "5%", not "0.05"
    return click.option("--noise", type=NoiseBand(), default=f"{default:.0%}", show_default=True, help=help)


class NoiseBand(click.ParamType):
    """A relative band: ``0.05`` or ``5%``."""

    name = "FRACTION|PERCENT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            self.fail(f"{value!r} is not a fraction (0.05) or a percentage (5%)", param, ctx)
        if not 0 <= number < 1:
            self.fail(f"{value!r} must be at least 0 and below 100%", param, ctx)
        return number

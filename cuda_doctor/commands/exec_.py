"""``cuda-doctor exec -- CMD ARGS…``, the container entrypoint: the fast check to stderr, then CMD
through ``os.execvp`` (CMD keeps the PID, so the container's signals and exit status are CMD's)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cuda_doctor.base.errors import UserError
from cuda_doctor.commands.options import (
    config_option,
    inspected_python,
    record_interpreter,
    severity_option,
    timeout_option,
)
from cuda_doctor.watch.child import EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND

if TYPE_CHECKING:
    from cuda_doctor.core.interpreter import Interpreter

EXIT_REFUSED = 1
#: A program that is a Python interpreter by its name: python, python3, python3.12.
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?")


@click.command("exec", context_settings={"allow_interspersed_args": False})
@severity_option("Lowest severity that stops CMD from starting (default: error, or fail-on from config).")
@click.option("--warn-only", is_flag=True, help="Print the findings but start CMD anyway.")
@click.option(
    "--with-framework",
    is_flag=True,
    help="Also import the framework (torch, TensorFlow) and judge its build (slower start).",
)
@timeout_option("Seconds each probe's external call (NVML, nvidia-smi) may take.")
@config_option
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def command(
    fail_on: str | None,
    warn_only: bool,
    with_framework: bool,
    timeout: float,
    config_path: Path | None,
    cmd: tuple[str, ...],
) -> None:
    """Check this machine, then become CMD (use as a container ENTRYPOINT).

    \b
    ENTRYPOINT ["cuda-doctor", "exec", "--"]
    CMD ["python", "train.py"]

    Exit status: CMD's own when it starts; 1 when the check refuses to start it; 126 when CMD
    cannot be executed, 127 when it is not found; 2 on a usage error.
    """
    program = cmd[0]
    problem = _resolve(program)
    if problem is not None:
        message, code = problem
        click.echo(f"cuda-doctor exec: {message}", err=True)
        sys.exit(code)
    # Imported here so `exec` with a missing CMD answers before paying for the pipeline.
    from cuda_doctor.core.config import load_config
    from cuda_doctor.core.pipeline import run_check
    from cuda_doctor.core.probe import ProbeContext
    from cuda_doctor.core.results import EXIT_NO_VERDICT, Severity, no_verdict
    from cuda_doctor.report.check import render

    config = load_config(config_path, Path.cwd())
    level = fail_on or config.fail_on or "error"
    # what exec leaves out is said as exec's choice, not as an option the user never passed
    because = "exec runs no GPU smoke run" if with_framework else "exec runs the fast check"
    chosen = _framework_python(program, timeout) if with_framework else None
    ctx = ProbeContext(
        python=chosen.path if chosen is not None else sys.executable,
        timeout=timeout,
        fast=not with_framework,
        smoke=False,
        skipped_because=f"at container start ({because})",
    )
    report = run_check(ctx, config, command="exec")
    record_interpreter(report.facts, chosen)
    click.echo(render(report, "text", verbose=False, terminal=sys.stderr.isatty(), fail_on=level), err=True, nl=False)
    code = report.exit_code(Severity(level))
    if code == EXIT_NO_VERDICT:  # only findings keep CMD from starting; say what was not checked
        click.echo(f"cuda-doctor exec: starting {program}, but {no_verdict(report.results)}", err=True)
    elif code != 0:
        if not warn_only:
            why = f"findings at or above '{level}' (fix them, or pass --warn-only to start anyway)"
            click.echo(f"cuda-doctor exec: not starting {program}: {why}", err=True)
            sys.exit(EXIT_REFUSED)
        click.echo(f"cuda-doctor exec: starting {program} despite the findings (--warn-only)", err=True)
    _become(cmd)


def _framework_python(program: str, timeout: float) -> Interpreter:
    """The interpreter whose framework --with-framework judges: CMD's own when CMD is a Python
    (``python train.py``), else the one ``check`` would inspect."""
    from cuda_doctor.core.interpreter import Interpreter, validate

    found = program if os.sep in program else shutil.which(program)
    if found is None or not _PYTHON_NAME.fullmatch(os.path.basename(found)):
        return inspected_python(None, timeout)
    try:
        validate(found, os.environ, timeout)
    except UserError as exc:  # CMD will fail on its own; the framework judged is said to be another
        other = inspected_python(None, timeout)
        return Interpreter(other.path, other.how, f"{other.why}; CMD's {found} was not judged: {exc.format_message()}")
    return Interpreter(found, "found", f"the interpreter CMD runs ({program})")


def _resolve(program: str) -> tuple[str, int] | None:
    """A shell's answer for a command it cannot run: (message, 127 or 126), or None if it can."""
    if os.sep in program:
        path = Path(program)
        if not path.exists():
            return f"{program}: No such file or directory", EXIT_NOT_FOUND
        if path.is_dir():
            return f"{program}: Is a directory", EXIT_CANNOT_EXECUTE
        if not os.access(path, os.X_OK):
            return f"{program}: Permission denied", EXIT_CANNOT_EXECUTE
        return None
    if shutil.which(program) is not None:
        return None
    # which() skips files without the execute bit; say so rather than "not found".
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if (Path(directory or ".") / program).is_file():
            return f"{program}: Permission denied", EXIT_CANNOT_EXECUTE
    return f"{program}: command not found", EXIT_NOT_FOUND


def _become(cmd: tuple[str, ...]) -> None:
    """Replace this process with ``cmd``; only returns by exiting when exec itself fails."""
    from cuda_doctor.gpu.nvml.read import wait_closed

    # CMD must not inherit what NVML, shut down in the background, still holds open
    if not wait_closed(timeout=2.0):
        click.echo("cuda-doctor exec: NVML did not shut down within 2 s; starting anyway", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ; ignored signals survive exec, so give CMD the defaults.
    for name in ("SIGPIPE", "SIGXFSZ"):
        signum = getattr(signal, name, None)
        if signum is not None:
            signal.signal(signum, signal.SIG_DFL)
    try:
        os.execvp(cmd[0], list(cmd))
    except FileNotFoundError:
        click.echo(f"cuda-doctor exec: {cmd[0]}: command not found", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except OSError as exc:
        click.echo(f"cuda-doctor exec: {cmd[0]}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_CANNOT_EXECUTE)

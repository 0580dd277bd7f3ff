"""The command line: click commands that wire the pipeline.  ``main`` is the one error boundary: usage
errors and ``UserError`` exit 2 with one line; anything unexpected exits 3, its traceback in a log file."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, cast

import click

from cuda_doctor import __version__
from cuda_doctor.base import streams
from cuda_doctor.commands import COMMANDS

#: Exit statuses (docs/checklist.md): 0 nothing at --fail-on, 1 findings, 2 usage or config error, 3 crash.
EXIT_USAGE = 2
EXIT_CRASH = 3


class LazyGroup(click.Group):
    """A group whose sub-commands are imported on first use (fast start-up matters here)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    # Parsing (--help, --version) and running: a lost stdout is ended by ``streams``, not click's exit 1.
    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with streams.ended_when_lost():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with streams.ended_when_lost():
            return super().invoke(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMANDS.get(cmd_name)
        return None if module_name is None else cast(click.Command, importlib.import_module(module_name).command)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cuda-doctor")
def cli() -> None:
    """Preflight doctor for GPU deep learning.

    Checks the NVIDIA driver, GPUs, framework build, container and training code before
    you spend hours on a run, and prints the exact fix for every problem.

    \b
    Start with:   cuda-doctor check
    In hooks:     cuda-doctor check --fast      (no framework import, no GPU work)
    Entrypoint:   cuda-doctor exec -- python train.py
    Why a rule:   cuda-doctor explain CD102
    """


def _write_crash_log() -> Path:
    import tempfile
    import time
    import traceback

    directory = Path(os.environ.get("XDG_STATE_HOME", Path(tempfile.gettempdir())))
    path = directory / f"cuda-doctor-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        from cuda_doctor.base import atomic
        from cuda_doctor.base.secrets import redact, redact_argv

        text = f"cuda-doctor {__version__}\nargv: {redact_argv(sys.argv)}\n\n{redact(traceback.format_exc())}"
        atomic.write_bytes(path, text.encode("utf-8", "backslashreplace"), mode=0o600)  # readable by its owner only
    except OSError:
        path = Path("(could not write a log; run with CUDA_DOCTOR_DEBUG=1 to see the traceback)")
    return path


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="cuda-doctor", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        if streams.stdout_lost(exc):  # closed: one line, exit 2; a pipe nobody reads: quiet, SIGPIPE
            streams.end(exc)
        if os.environ.get("CUDA_DOCTOR_DEBUG"):
            raise
        log = _write_crash_log()
        click.echo(f"cuda-doctor: internal error: {type(exc).__name__}: {exc} (details in {log})", err=True)
        sys.exit(EXIT_CRASH)

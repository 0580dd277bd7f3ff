"""``cuda-doctor watch -- CMD``: run a command, sample its GPUs, say what held it back."""

from __future__ import annotations

import math
import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import click

from cuda_doctor.base.secrets import redact_argv
from cuda_doctor.commands.options import file_option, format_option
from cuda_doctor.commands.output import write_file
from cuda_doctor.gpu.nvml import nvml_disabled
from cuda_doctor.gpu.nvml.events import XidEvents
from cuda_doctor.report.watch import FORMATS, render
from cuda_doctor.watch import child
from cuda_doctor.watch.sampler import DEFAULT_INTERVAL_S, Sampler
from cuda_doctor.watch.samples import Series
from cuda_doctor.watch.verdict import analyse


def _render(fmt: str, series: Series, color: bool) -> str:
    return render(series, analyse(series), fmt, host=socket.gethostname(), color=color)


SEPARATOR = "----- cuda-doctor watch report ({fmt}) -----\n"


def _interval(ctx: click.Context, param: click.Parameter, value: float) -> float:
    # click.FloatRange lets NaN through (every comparison with NaN is false).
    if not math.isfinite(value) or value < 0.05:
        raise click.BadParameter(f"{value!r} is not a number of seconds of at least 0.05")
    return value


def _writable(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """Fail before the command runs, not after an hour of it: create the folder, try the file."""
    if value is None:
        return None
    existed = value.exists()
    try:
        if value.is_dir():
            raise click.BadParameter(f"{value} is a directory")
        value.parent.mkdir(parents=True, exist_ok=True)
        with value.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise click.BadParameter(f"cannot write {value}: {exc.strerror or exc}") from None
    if not existed:
        value.unlink()  # the report is written at the end; leave nothing behind if it never runs
    return value


@click.command("watch", context_settings={"allow_interspersed_args": False})
@click.option(
    "--interval",
    type=float,
    callback=_interval,
    default=DEFAULT_INTERVAL_S,
    show_default=True,
    help="Seconds between NVML samples.",
)
@format_option(
    FORMATS,
    help="Report format. The command's stdout stays its own: the report goes to --output FILE, "
    "else (json with --save) to the --save file, else to stderr; json and markdown on stderr come "
    "after a '----- cuda-doctor watch report (FORMAT) -----' line.",
)
@file_option(
    "--output", "-o", callback=_writable, help="Write the report, in the chosen --format, to FILE instead of stderr."
)
@file_option(
    "--save",
    callback=_writable,
    help="Also write the full JSON report (every sample) to FILE (missing folders are created).",
)
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED, required=True)
def command(interval: float, fmt: str, output: Path | None, save: Path | None, cmd: tuple[str, ...]) -> None:
    """Run CMD and report whether its GPUs were busy, and what held them back.

    The command's output passes through untouched, Ctrl-C and SIGTERM reach it, and its exit
    code becomes this command's exit code.  Example: cuda-doctor watch -- python train.py
    """
    with child.forwarding_signals() as forwarder:
        started = time.monotonic()
        proc = child.spawn(cmd)
        if isinstance(proc, child.SpawnError):
            click.echo(proc.message, err=True)
            sys.exit(proc.exit_code)
        forwarder.attach(proc)
        sampler = Sampler(proc.pid, interval=interval, started=started, command=tuple(redact_argv(cmd)))
        sampler.start()
        listening = None if nvml_disabled(os.environ) else XidEvents().start(ready_timeout=0)
        code = child.wait(proc)
        series = replace(sampler.stop(), exit_code=code)
        if listening is not None:
            events, why = listening.stop()
            notes = series.notes if why is None else (*series.notes, f"Xid events were not read: {why}")
            series = replace(series, xid_events=tuple(events), notes=notes)
    try:
        _deliver(fmt, series, output, save)
    except Exception as exc:  # the report failing must not change the command's exit code
        click.echo(f"cuda-doctor watch: could not write the report: {exc}", err=True)
    sys.exit(code)


def _deliver(fmt: str, series: Series, output: Path | None, save: Path | None) -> None:
    """The report to --output, else to the --save file when that is the same JSON, else stderr."""
    if save is not None:
        write_file(save, _render("json", series, color=False))
    if output is not None:
        write_file(output, _render(fmt, series, color=False))
        return
    if fmt == "json" and save is not None:
        click.echo(f"cuda-doctor watch: report written to {save}", err=True)
        return
    color = fmt == "text" and sys.stderr.isatty() and "NO_COLOR" not in os.environ
    separator = "" if fmt == "text" else SEPARATOR.format(fmt=fmt)
    sys.stderr.write(separator + _render(fmt, series, color=color))
    sys.stderr.flush()

"""``cuda-doctor watch -- CMD``: run a command, sample its GPUs, say what held it back."""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import click

from cuda_doctor.watch import child
from cuda_doctor.watch.sampler import DEFAULT_INTERVAL_S, Sampler
from cuda_doctor.watch.samples import Series
from cuda_doctor.watch.verdict import analyse


def _render(fmt: str, series: Series, color: bool) -> str:
    analysis = analyse(series)
    if fmt == "json":
        from cuda_doctor.report import watch_json

        return watch_json.render(series, analysis, socket.gethostname())
    if fmt == "markdown":
        from cuda_doctor.report import watch_markdown

        return watch_markdown.render(series, analysis)
    from cuda_doctor.report import watch_text

    return watch_text.render(series, analysis, color=color)


@click.command(
    "watch",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=DEFAULT_INTERVAL_S,
    show_default=True,
    help="Seconds between NVML samples.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="Report format (the report goes to stderr; the command's stdout stays its own).",
)
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the full JSON report (every sample) to FILE.",
)
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED, required=True)
def command(interval: float, fmt: str, save: Path | None, cmd: tuple[str, ...]) -> None:
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
        sampler = Sampler(proc.pid, interval=interval, started=started, command=cmd)
        sampler.start()
        code = child.wait(proc)
        series = replace(sampler.stop(), exit_code=code)
    try:
        report = _render(fmt, series, color=sys.stderr.isatty() and "NO_COLOR" not in os.environ)
        sys.stderr.write(report)
        sys.stderr.flush()
        if save is not None:
            save.write_text(_render("json", series, color=False), encoding="utf-8")
    except Exception as exc:  # the report failing must not change the command's exit code
        click.echo(f"cuda-doctor watch: could not write the report: {exc}", err=True)
    sys.exit(code)

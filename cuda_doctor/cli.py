"""The command line: click commands that wire the pipeline.  No logic lives here."""

from __future__ import annotations

import click

from cuda_doctor import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cuda-doctor")
def cli() -> None:
    """Preflight doctor for GPU deep learning.

    Checks the NVIDIA driver, GPUs, framework build, container and training code before
    you spend hours on a run, and prints the exact fix for every problem.
    """


def _register() -> None:
    # The explicit list of sub-commands (one module each, in cuda_doctor/commands/).
    from cuda_doctor.commands import COMMANDS

    for command in COMMANDS:
        cli.add_command(command)


def main() -> None:
    _register()
    cli(prog_name="cuda-doctor")

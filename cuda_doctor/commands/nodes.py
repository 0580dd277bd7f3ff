"""``cuda-doctor nodes``: one task per node under srun, torchrun or mpirun checks the nodes against
each other; rank 0 prints the verdict."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from cuda_doctor.commands import options
from cuda_doctor.commands.options import Seconds
from cuda_doctor.report.check import FORMATS, render


def _ports(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    if value.strip() == "0":
        return (0,)
    from cuda_doctor.nodes.reach import parse_ports

    try:
        return parse_ports(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.command("nodes")
@options.format_option(FORMATS)
@click.option("--rank", type=click.IntRange(0), default=None, help="This task's rank (default: from the launcher).")
@click.option(
    "--world-size", type=click.IntRange(1, 65536), default=None, help="Number of ranks (default: from the launcher)."
)
@click.option(
    "--master",
    metavar="HOST[:PORT]",
    default=None,
    help="Where rank 0 listens for the others (default: MASTER_ADDR, or the first node of the Slurm step; "
    "the port: MASTER_PORT, under torchrun MASTER_PORT + 1, else 29431). :PORT keeps the launcher's host.",
)
@click.option(
    "--deadline",
    type=Seconds(1, 3600),
    default=60.0,
    show_default=True,
    help="Seconds every rank has to join rank 0; a rank that has not is named and left out.",
)
@click.option(
    "--ports",
    metavar="LOW-HIGH",
    callback=_ports,
    default=None,
    help="Ports each node listens on and the others connect to (the job's port range, at most 16; "
    "default: the meeting port + 1; 0: one the kernel picks).",
)
@click.option(
    "--connect-timeout",
    type=Seconds(0.1, 60),
    default=3.0,
    show_default=True,
    help="Seconds one connection test may take.",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "gloo", "nccl", "none"]),
    default="auto",
    show_default=True,
    help="The all-reduce's backend: auto is NCCL when every node has a GPU, else Gloo; none skips it.",
)
@click.option(
    "--allreduce-timeout",
    type=Seconds(5, 3600),
    default=120.0,
    show_default=True,
    help="Seconds each node's all-reduce may take, the import of torch included.",
)
@options.python_option("Run the all-reduce with this interpreter's torch (default: the current one).")
@options.timeout_option("Seconds each probe's external call (NVML, nvidia-smi) may take.")
@options.file_option("--save-dir", help="Also write each node's report into this folder (for `cuda-doctor fleet`).")
@options.selection
@options.fail_on_option
@options.config_option
@click.option("-v", "--verbose", is_flag=True, help="Passing checks too; every rank says what it does on stderr.")
def command(
    fmt: str,
    rank: int | None,
    world_size: int | None,
    master: str | None,
    deadline: float,
    ports: tuple[int, ...] | None,
    connect_timeout: float,
    backend: str,
    allreduce_timeout: float,
    python: str | None,
    timeout: float,
    save_dir: Path | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: str | None,
    config_path: Path | None,
    verbose: bool,
) -> None:
    """Check the nodes of a multi-node job against each other, before the job.

    Run one task per node with the job's own launcher (srun, torchrun, mpirun; docs/cluster.md).
    Rank 0 gathers every node's fast facts and names the node that differs from the others
    (driver, CUDA, torch, NCCL, GPUs), tests that every node reaches every other on the job's
    interface and ports, runs an all-reduce across the nodes with the --python interpreter's
    torch (Gloo without GPUs, NCCL with them), and prints one checklist.  The other ranks print
    nothing unless --verbose.  A rank that does not join within --deadline is named.

    Exit status: 0 nothing at --fail-on, 1 findings, 2 no verdict or a usage error.
    """
    from cuda_doctor.core.config import load_config
    from cuda_doctor.nodes.placement import place
    from cuda_doctor.nodes.run import run, save_reports
    from cuda_doctor.nodes.session import Settings

    config = load_config(config_path, Path.cwd())
    fail_on = fail_on or config.fail_on or "error"
    env = dict(os.environ)
    placement = place(env, rank=rank, world_size=world_size, master=master)
    settings = Settings(
        python=python or sys.executable,
        env=env,
        deadline=deadline,
        connect_timeout=connect_timeout,
        allreduce_timeout=allreduce_timeout,
        backend=backend,
        ports=ports or (),
        probe_timeout=timeout,
        log=_log if verbose else _quiet,
    )
    outcome = run(placement, settings, config, fail_on, select, ignore)
    if outcome.report is None:  # not rank 0
        settings.log(f"rank {placement.rank}: {outcome.said}; exit status {outcome.exit_code}")
        if outcome.exit_code == 2 and not verbose:  # no verdict from rank 0: say why, once
            click.echo(f"cuda-doctor nodes: rank {placement.rank}: {outcome.said}", err=True)
        sys.exit(outcome.exit_code)
    if save_dir is not None:
        save_reports(save_dir, outcome.node_reports, fail_on)
    text = render(outcome.report, fmt, verbose=verbose, terminal=sys.stdout.isatty(), fail_on=fail_on)
    click.echo(text, nl=False)
    sys.exit(outcome.exit_code)


def _log(line: str) -> None:
    click.echo(f"cuda-doctor nodes: {line}", err=True)


def _quiet(line: str) -> None:
    """Ranks other than 0 print nothing without --verbose."""

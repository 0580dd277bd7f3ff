"""``cuda-doctor slurm``: the fast check as Slurm's HealthCheckProgram and Prolog."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from cuda_doctor.commands.options import F, Seconds, config_option, fail_on_option, format_option, selection
from cuda_doctor.report.check import FORMATS as CHECK_FORMATS


@click.group("slurm")
def command() -> None:
    """Run the fast check from Slurm: drain a failing node, undrain it once it passes.

    \b
    slurm.conf names programs, not command lines, so install the hooks as scripts:
      cuda-doctor slurm script health-check > /etc/slurm/cuda-doctor-health-check
      cuda-doctor slurm script prolog > /etc/slurm/cuda-doctor-prolog
    then set HealthCheckProgram= and Prolog= to them (docs/cluster.md).
    """


def hook_options(func: F) -> F:
    func = config_option(func)
    func = fail_on_option(func)
    func = selection(func)
    func = click.option("--dry-run", is_flag=True, help="Say what would be done to the node; change nothing.")(func)
    func = click.option(
        "--timeout",
        type=Seconds(0.5, 60),
        default=10.0,
        show_default=True,
        help="Seconds each of the check's external calls (NVML, nvidia-smi) may take.",
    )(func)
    func = click.option(
        "--budget",
        type=Seconds(1, 3600),
        default=40.0,
        show_default=True,
        help="Seconds the whole check may take; past it the check is killed and the node left as it is.",
    )(func)
    func = click.option(
        "--node",
        default=None,
        help="The Slurm node name (default: $SLURMD_NODENAME, which slurmd sets, else the short host name).",
    )(func)
    return func


@command.command("health-check")
@hook_options
def health_check(**options: Any) -> None:
    """Drain this node when the fast check fails; undrain it when it passes again.

    Only a drain whose reason starts with "cuda-doctor: " is ever undrained; a node drained
    for any other reason is left alone.  The rules are those about the node (driver, gpu,
    health) unless --select says otherwise.  Exit status: 0 healthy, 1 the check failed, 2 no
    verdict (the check could not judge the node or ran out of time) or Slurm refused.
    """
    outcome, problem = _run_hook(**options)
    sys.exit(2 if problem else {"OK": 0, "FAIL": 1}.get(outcome, 2))


@command.command("prolog")
@hook_options
def prolog(**options: Any) -> None:
    """Before a job: on a failing check, drain this node and exit 1 so that the job does not start here.

    Slurm requeues a job whose prolog fails (held, unless SchedulerParameters has
    nohold_on_prolog_fail).  With no verdict the job starts (exit 0).  The prolog never
    undrains: the health check does.
    """
    outcome, _ = _run_hook(**options)
    sys.exit(1 if outcome == "FAIL" else 0)


@command.command("pre-job")
@click.option(
    "--deadline", type=Seconds(1, 3600), default=60.0, show_default=True, help="Seconds every node has to join."
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "gloo", "nccl", "none"]),
    default="auto",
    show_default=True,
    help="The all-reduce's backend (auto: NCCL when every node has a GPU, else Gloo).",
)
@click.option(
    "--allreduce-timeout",
    type=Seconds(5, 3600),
    default=120.0,
    show_default=True,
    help="Seconds the all-reduce may take.",
)
@click.option("--ports", metavar="LOW-HIGH", default=None, help="The job's port range to test between the nodes.")
@click.option("--python", "python", default=None, help="The job's interpreter, whose torch runs the all-reduce.")
@format_option(CHECK_FORMATS)
@fail_on_option
@click.option("-v", "--verbose", is_flag=True, help="Show passing checks too.")
def pre_job(
    deadline: float,
    backend: str,
    allreduce_timeout: float,
    ports: str | None,
    python: str | None,
    fmt: str,
    fail_on: str | None,
    verbose: bool,
) -> None:
    """Before a multi-node job's work: check its nodes against each other, from its batch script.

    Runs `cuda-doctor nodes` as one srun task per node of the job (the same nodes, driver,
    network and interpreter the job's own srun will use) and prints rank 0's checklist.
    In a batch script: `cuda-doctor slurm pre-job && srun python train.py`.  Exit status: 0
    nothing at --fail-on, 1 findings (the nodes to leave out are named on stderr), 2 no
    verdict (not inside a job, or srun gave no report).
    """
    from cuda_doctor.core.results import Severity
    from cuda_doctor.report.check import render
    from cuda_doctor.slurm.prejob import run_prejob

    interpreter = python or sys.executable
    args = ["--deadline", f"{deadline:g}", "--backend", backend, "--allreduce-timeout", f"{allreduce_timeout:g}"]
    args += ["--python", interpreter] + (["--ports", ports] if ports else [])
    args += ["--fail-on", fail_on] if fail_on else []
    outcome = run_prejob(dict(os.environ), sys.executable, args, budget=deadline + allreduce_timeout + 30)
    if outcome.report is None:
        click.echo(f"cuda-doctor slurm pre-job: no verdict: {outcome.problem}", err=True)
        sys.exit(2)
    level = fail_on or "error"
    click.echo(render(outcome.report, fmt, verbose=verbose, terminal=sys.stdout.isatty(), fail_on=level), nl=False)
    code = outcome.report.exit_code(Severity(level))
    suspects = outcome.report.facts.get("nodes.suspects")
    if code == 1 and isinstance(suspects, list) and suspects:
        names = ",".join(str(s) for s in suspects)
        click.echo(f"cuda-doctor slurm pre-job: to run without them: srun --exclude={names} …", err=True)
    sys.exit(code)


@command.command("script")
@click.argument("kind", type=click.Choice(["health-check", "prolog"]))
def script(kind: str) -> None:
    """Print the program to name in slurm.conf (HealthCheckProgram= or Prolog=) for KIND."""
    from cuda_doctor.slurm.scripts import hook_script

    click.echo(hook_script(kind), nl=False)


def _run_hook(
    node: str | None,
    budget: float,
    timeout: float,
    dry_run: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: str | None,
    config_path: Path | None,
) -> tuple[str, str | None]:
    """Check, read the node, act; print one line.  Returns (verdict, problem)."""
    from cuda_doctor.slurm.health import NODE_RULES, apply, decide, node_name, run_check
    from cuda_doctor.slurm.node import Slurm

    name = node_name(node, os.environ)
    args = ["--timeout", f"{timeout:g}", f"--select={','.join(select or NODE_RULES)}"]
    args += [f"--ignore={','.join(ignore)}"] if ignore else []
    args += ["--fail-on", fail_on] if fail_on else []
    args += ["--config", str(config_path)] if config_path else []
    outcome = run_check(args, budget)
    slurm = Slurm()
    state = slurm.node(name)
    if isinstance(state, str):
        click.echo(f"{name}: {outcome.line}", nl=True)
        click.echo(f"cuda-doctor slurm: {state}; node left as it is", err=True)
        return outcome.verdict, state
    action = decide(outcome, state)
    problem = None if dry_run else apply(action, name, slurm)
    done = f"would be {action.why}" if dry_run and action.kind != "none" else action.why
    click.echo(f"{name}: {outcome.line} -> {done}")
    if problem:
        click.echo(f"cuda-doctor slurm: {problem}", err=True)
    return outcome.verdict, problem

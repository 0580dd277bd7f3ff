"""The multi-node pre-job check from inside a Slurm job: ``srun`` one task of ``cuda-doctor nodes``
per node of the allocation, bounded in time, and read rank 0's report back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cuda_doctor.base.errors import UserError
from cuda_doctor.base.process import run_command
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result
from cuda_doctor.nodes.placement import DEFAULT_PORT

#: Seconds srun has, beyond the check's own bounds, to start the tasks and end them.
SRUN_SLACK = 60.0


@dataclass(frozen=True)
class PreJob:
    report: Report | None  # rank 0's; None when none came back
    problem: str | None  # why there is no report, in words
    srun_status: int | None


def job_nodes(env: Mapping[str, str]) -> int:
    """The number of nodes of the job this runs in; a ``UserError`` outside a job."""
    if not env.get("SLURM_JOB_ID"):
        raise UserError("not inside a Slurm job: run it in a batch script (sbatch) or an allocation (salloc)")
    count = (env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "").strip()
    if not count.isdigit() or int(count) < 1:
        raise UserError(f"SLURM_JOB_NUM_NODES={count!r} is not a number of nodes")
    return int(count)


def meeting_port(env: Mapping[str, str]) -> int:
    """MASTER_PORT where the job script sets one; else a port that differs between jobs that share nodes."""
    given = env.get("MASTER_PORT", "").strip()
    if given.isdigit() and 0 < int(given) < 65536:
        return int(given)
    job = env.get("SLURM_JOB_ID", "").strip()
    return DEFAULT_PORT + (int(job) % 1000 if job.isdigit() else 0)


def srun_argv(nodes: int, python: str, nodes_args: Sequence[str]) -> list[str]:
    # --wait: a task still running 10 s after the first ended (one that never joined) is ended
    return [
        "srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--wait=10",
        python, "-m", "cuda_doctor", "nodes", "--format", "json", *nodes_args,
    ]  # fmt: skip


def run_prejob(env: Mapping[str, str], python: str, nodes_args: Sequence[str], budget: float) -> PreJob:
    nodes = job_nodes(env)
    run_env = {**env, "MASTER_PORT": str(meeting_port(env))}
    done = run_command(srun_argv(nodes, python, nodes_args), timeout=budget + SRUN_SLACK, env=run_env)
    if done.returncode is None or done.timed_out:
        return PreJob(None, done.error or "srun did not answer", done.returncode)
    try:
        data = json.loads(done.stdout)
        report = Report(
            facts=Facts.from_dict(data["facts"]),
            results=[Result.from_dict(r) for r in data["results"]],
            command="nodes",
            host=str(data.get("host") or ""),
        )
    except (ValueError, KeyError, TypeError) as exc:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        why = f"srun exited {done.returncode} without rank 0's report ({type(exc).__name__}): {said}"
        return PreJob(None, why, done.returncode)
    return PreJob(report, None, done.returncode)

"""The pre-job check's srun line, port and job size, from a job's environment (no Slurm needed)."""

from __future__ import annotations

import pytest

from cuda_doctor.base.errors import UserError
from cuda_doctor.nodes.placement import DEFAULT_PORT
from cuda_doctor.slurm.prejob import job_nodes, meeting_port, srun_argv


def test_outside_a_job_is_a_user_error() -> None:
    with pytest.raises(UserError, match="not inside a Slurm job"):
        job_nodes({})
    with pytest.raises(UserError, match="not a number of nodes"):
        job_nodes({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "x"})


def test_the_jobs_nodes_and_port() -> None:
    env = {"SLURM_JOB_ID": "123456", "SLURM_JOB_NUM_NODES": "16"}
    assert job_nodes(env) == 16
    assert meeting_port(env) == DEFAULT_PORT + 456  # jobs sharing nodes meet on different ports
    assert meeting_port({**env, "MASTER_PORT": "29500"}) == 29500


def test_one_task_per_node() -> None:
    argv = srun_argv(4, "/opt/venv/bin/python", ["--deadline", "60"])
    assert argv[:5] == ["srun", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1", "--wait=10"]
    assert argv[5:] == ["/opt/venv/bin/python", "-m", "cuda_doctor", "nodes", "--format", "json", "--deadline", "60"]

"""Rank, world size and rank 0's address from each launcher's environment, and the options that win."""

from __future__ import annotations

import pytest

from cuda_doctor.base.errors import UserError
from cuda_doctor.nodes.placement import DEFAULT_PORT, expand_hostlist, place, split_endpoint


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("gpu-01", ["gpu-01"]),
        ("gpu-[01-03,07],login1", ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "login1"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ],
)
def test_slurm_host_lists_expand(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["gpu-[01-03", "gpu-[a-b]", "n[0-99999999]"])
def test_a_broken_host_list_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError):
        expand_hostlist(text)


def test_srun_gives_rank_world_and_the_first_node_as_rank_0() -> None:
    env = {"SLURM_PROCID": "2", "SLURM_NTASKS": "3", "SLURM_STEP_NODELIST": "gpu-[06-08]", "SLURM_LOCALID": "0"}
    placement = place(env)
    assert (placement.rank, placement.world_size, placement.master_host) == (2, 3, "gpu-06")
    assert placement.port == DEFAULT_PORT and placement.launcher == "slurm"
    assert placement.node_of(2) == "gpu-08"


def test_torchrun_meets_beside_its_own_store() -> None:
    env = {
        "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "job",
    }  # fmt: skip
    placement = place(env)
    assert (placement.rank, placement.world_size, placement.local_rank) == (1, 4, 1)
    assert (placement.master_host, placement.port, placement.launcher) == ("10.0.0.1", 29501, "torchrun")
    assert placement.node_of(3) is None  # torchrun does not say where the ranks run


def test_mpirun_needs_rank_0s_address_from_an_option() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}
    with pytest.raises(UserError, match="--master"):
        place(env)
    placement = place(env, master="head:4000")
    assert (placement.rank, placement.world_size, placement.master_host, placement.port) == (0, 2, "head", 4000)


def test_options_win_over_the_launcher() -> None:
    env = {"SLURM_PROCID": "2", "SLURM_NTASKS": "3", "SLURM_NODELIST": "a,b,c"}
    placement = place(env, rank=0, world_size=1, master="127.0.0.1:5000")
    assert (placement.rank, placement.world_size, placement.master_host, placement.port) == (0, 1, "127.0.0.1", 5000)


@pytest.mark.parametrize(
    ("env", "options", "match"),
    [
        ({}, {}, "srun, torchrun or mpirun"),
        ({}, {"rank": 3, "world_size": 2, "master": "h"}, "not within"),
        ({"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}, {}, "not a whole number"),
        ({}, {"rank": 0, "world_size": 1, "master": "h:99999"}, "not a port"),
    ],
)
def test_what_cannot_be_placed_is_a_user_error(env: dict[str, str], options: dict[str, object], match: str) -> None:
    with pytest.raises(UserError, match=match):
        place(env, **options)  # type: ignore[arg-type]


def test_endpoints() -> None:
    assert split_endpoint("host:1") == ("host", 1)
    assert split_endpoint("host") == ("host", None)
    assert split_endpoint("[fe80::1]:7") == ("fe80::1", 7)
    assert split_endpoint(":29600") == ("", 29600)
    with pytest.raises(UserError):
        split_endpoint(":")


def test_a_port_alone_keeps_the_launchers_host() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "node-a", "MASTER_PORT": "41000", "TORCHELASTIC_RUN_ID": "x"}
    placement = place(env, master=":29600")
    assert (placement.master_host, placement.port) == ("node-a", 29600)

"""NCCL's and Gloo's interface variables matched against a node's interfaces, and the job's address."""

from __future__ import annotations

import pytest

from cuda_doctor.nodes.interfaces import Interface, gloo_matches, interfaces, job_address, nccl_matches

NAMES = ["lo", "eth0", "eth1", "ib0", "docker0"]
FOUND = [
    Interface("lo", "127.0.0.1", "unknown", None),
    Interface("eth0", "10.1.0.5", "up", 25000),
    Interface("ib0", None, "down", None),
]


@pytest.mark.parametrize(
    ("spec", "selected"),
    [
        ("eth", ["eth0", "eth1"]),
        ("=eth", []),
        ("=eth1", ["eth1"]),
        ("^docker,lo", ["eth0", "eth1", "ib0"]),
        ("^=eth0", ["lo", "eth1", "ib0", "docker0"]),
        ("ib,eth1", ["eth1", "ib0"]),
    ],
)
def test_nccl_socket_ifname_syntax(spec: str, selected: list[str]) -> None:
    assert nccl_matches(spec, NAMES) == selected


def test_gloo_names_exact_interfaces() -> None:
    assert gloo_matches("eth", NAMES) == []
    assert gloo_matches("eth1,ib0", NAMES) == ["eth1", "ib0"]


def test_the_backends_variable_picks_the_address() -> None:
    job = job_address({"GLOO_SOCKET_IFNAME": "eth0"}, "gloo", "127.0.0.1", FOUND)
    assert (job.address, job.interface, job.chosen_by, job.problems) == ("10.1.0.5", "eth0", "GLOO_SOCKET_IFNAME", ())


def test_a_variable_that_selects_nothing_here_is_a_problem() -> None:
    job = job_address({"NCCL_SOCKET_IFNAME": "=eth9", "GLOO_SOCKET_IFNAME": "ib0"}, "gloo", "127.0.0.1", FOUND)
    assert job.problems == (
        "NCCL_SOCKET_IFNAME==eth9 selects no interface here (interfaces: lo 127.0.0.1, eth0 10.1.0.5, ib0)",
        "GLOO_SOCKET_IFNAME=ib0 selects only interfaces without an IPv4 address here "
        "(interfaces: lo 127.0.0.1, eth0 10.1.0.5, ib0)",
    )
    assert job.chosen_by == "route to rank 0"  # neither gave a usable address


def test_without_a_variable_the_route_to_rank_0_decides() -> None:
    job = job_address({}, "gloo", "127.0.0.1", FOUND)
    assert (job.address, job.interface, job.chosen_by) == ("127.0.0.1", "lo", "route to rank 0")


def test_this_machine_has_a_loopback_with_its_address() -> None:
    found = {i.name: i for i in interfaces()}
    assert found["lo"].address == "127.0.0.1"

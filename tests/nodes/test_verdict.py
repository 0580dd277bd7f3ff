"""Rank 0's conclusions from what the ranks reported, without any network: the nodes.* facts."""

from __future__ import annotations

from typing import Any

from cuda_doctor.nodes.allreduce import RankOutcome
from cuda_doctor.nodes.placement import Placement
from cuda_doctor.nodes.session import Gathered, Member, Settings
from cuda_doctor.nodes.verdict import nodes_facts

HOSTS = ("gpu-01", "gpu-02", "gpu-03", "gpu-04")


def hello(rank: int, **facts: Any) -> dict[str, Any]:
    values = {"driver.version": "580.159.04", "driver.cuda_version": "13.0", "gpu.count": 8, **facts}
    return {
        "type": "hello", "rank": rank, "host": HOSTS[rank], "facts": {"values": values, "unknown": {}},
        "address": f"10.0.0.{rank + 1}", "interface": "eth0", "ports": [29432], "speed_mbps": 400000,
    }  # fmt: skip


def ok(rank: int, torch: str = "2.13.0", busbw: float = 40.0) -> RankOutcome:
    versions = {"torch_installed": True, "torch_version": torch, "cuda_build": "13.0", "nccl_version": "2.28.9"}
    result = {"rank": rank, "sum_ok": True, "bytes": 1 << 24, "algbw_gbps": busbw / 1.5, "busbw_gbps": busbw}
    return RankOutcome("ok", versions, {**result, "device": "cuda:0"}, joined=True)


def gathered(members: list[Member], missing: tuple[int, ...] = (), backend: str = "nccl") -> Gathered:
    placement = Placement(0, 4, "gpu-01", 29431, 0, "slurm", HOSTS)
    settings = Settings("python3", {}, 60.0, 3.0, 120.0, "auto", ())
    group = [m.rank for m in members]
    return Gathered(placement, settings, {m.rank: m for m in members}, list(missing), backend, group, 0.0)


def reached(rank: int, *failing: int) -> list[dict[str, Any]]:
    return [
        {"rank": peer, "address": f"10.0.0.{peer + 1}", "port": 29432, "ok": peer not in failing, "error": "timed out"}
        for peer in range(4)
        if peer != rank
    ]


def test_a_healthy_job() -> None:
    members = [Member(r, hello(r), None, reached(r), ok(r)) for r in range(4)]
    values = nodes_facts(gathered(members))[0].values
    assert values["nodes.missing"] == [] and values["nodes.differing"] == [] and values["nodes.unreachable"] == []
    assert values["nodes.allreduce.status"] == "ok" and values["nodes.allreduce.sum_ok"] is True
    assert values["nodes.allreduce.link_gbps"] == 50.0  # 400 Gb/s
    assert values["nodes.allreduce.expected_busbw_gbps"] == 45.0  # the table's 0.9, not measured here
    assert values["nodes.suspects"] == []


def test_each_fault_names_its_node() -> None:
    members = [
        Member(0, hello(0), None, reached(0, 2), ok(0)),
        Member(1, hello(1), None, reached(1, 2), ok(1, torch="2.14.1")),
        Member(2, hello(2), None, reached(2), ok(2)),
    ]
    values = nodes_facts(gathered(members, missing=(3,)))[0].values
    assert values["nodes.missing"] == ["rank 3, node gpu-04, did not join in 60 s"]
    assert values["nodes.differing"] == ["gpu-02: torch 2.14.1 (the others: 2.13.0)"]
    assert values["nodes.unreachable"] == [
        "gpu-01 (eth0 10.0.0.1) -> gpu-03 (eth0 10.0.0.3) port 29432: timed out",
        "gpu-02 (eth0 10.0.0.2) -> gpu-03 (eth0 10.0.0.3) port 29432: timed out",
    ]
    assert values["nodes.suspects"] == ["gpu-02", "gpu-03", "gpu-04"]


def test_the_rank_that_failed_first_is_the_cause() -> None:
    members = [
        Member(0, hello(0), None, [], RankOutcome("stopped", error="stopped: another rank had failed")),
        Member(1, hello(1), None, [], RankOutcome("failed", error="RuntimeError: Unable to find address for: eth0")),
        Member(2, hello(2), None, [], RankOutcome("timeout", error="init_process_group did not return in 120 s")),
    ]
    values = nodes_facts(gathered(members, backend="gloo"))[0].values
    assert values["nodes.allreduce.status"] == "failed"
    assert values["nodes.allreduce.error"] == (
        "rank 1, node gpu-02: RuntimeError: Unable to find address for: eth0 (2 other rank(s) did not finish either)"
    )


def test_a_tie_suspects_nobody() -> None:
    members = [Member(0, hello(0), None, [], ok(0)), Member(1, hello(1), None, [], ok(1, torch="2.14.1"))]
    values = nodes_facts(gathered(members))[0].values
    assert len(values["nodes.differing"]) == 1  # one of the two is named as different from the other
    assert values["nodes.suspects"] == []  # but neither is the majority: no node is to blame

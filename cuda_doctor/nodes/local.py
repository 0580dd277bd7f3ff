"""What one node tells rank 0 about itself: the fast check's facts (the network probe's among
them), and the job's interface and address on this node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cuda_doctor.core.families import PROBES, load
from cuda_doctor.core.pipeline import gather
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.nodes.interfaces import Interface, JobAddress, interfaces, job_address


def probe_names() -> list[str]:
    """The fast check's probes, the network probe among them."""
    return [name for name, entry in PROBES.items() if entry.fast]


def gather_facts(python: str, env: Mapping[str, str], timeout: float) -> dict[str, Any]:
    """The facts of ``probe_names()`` on this node, as ``Facts.to_dict`` writes them."""
    ctx = ProbeContext(python=python, env=dict(env), timeout=timeout, fast=True, smoke=False)
    facts = gather(ctx, [load(PROBES[name].module) for name in probe_names()])
    return facts.to_dict()


@dataclass(frozen=True)
class Network:
    interfaces: tuple[Interface, ...]
    job: JobAddress

    def speed_mbps(self) -> int | None:
        return next((i.speed_mbps for i in self.interfaces if i.name == self.job.interface), None)


def network(env: Mapping[str, str], backend: str, master: str) -> Network:
    found = interfaces()
    return Network(tuple(found), job_address(env, backend, master, found))

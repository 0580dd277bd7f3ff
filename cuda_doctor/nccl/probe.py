"""The NCCL probe: an all-reduce across all visible GPUs plus interconnect facts.

Runs only as part of the smoke run (never under ``--fast``), when asked for (``--nccl``)
or when two or more GPUs may be visible.  The GPU count is learned here (NVML, narrowed by
``CUDA_VISIBLE_DEVICES``); with one GPU the all-reduce is not applicable and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cuda_doctor.deadline import call_with_deadline
from cuda_doctor.facts import Facts
from cuda_doctor.nccl import runner, topology
from cuda_doctor.probes.base import ProbeContext

#: Extra seconds on top of ``ctx.smoke_timeout``: N processes import torch and set up NCCL.
_GROUP_SLACK_S = 60.0


def visible_count(nvml_count: int, cuda_visible_devices: str | None) -> int:
    """How many CUDA devices a process will see, given NVML's count and CUDA_VISIBLE_DEVICES,
    read as the CUDA_VISIBLE_DEVICES rule reads it (``knowledge.visible_devices``)."""
    from cuda_doctor.knowledge import visible_devices

    visible = visible_devices(cuda_visible_devices, nvml_count, []).visible  # UUIDs: not known here
    return nvml_count if visible is None else visible


class NcclProbe:
    name = "nccl"

    def __init__(
        self,
        nvml_loader: Callable[[], Any] = topology.load_nvml,
        backend: str = "nccl",
        sizes: tuple[int, ...] = runner.DEFAULT_SIZES,
        iters: int = 20,
        warmup: int = 5,
    ) -> None:
        self._nvml_loader = nvml_loader
        self._backend = backend
        self._sizes = sizes
        self._iters = iters
        self._warmup = warmup

    def deadline(self, ctx: ProbeContext) -> float:
        # two NVML calls and `nvidia-smi topo -m`, each within ctx.timeout, then the ranks
        return 3 * ctx.timeout + ctx.smoke_timeout + _GROUP_SLACK_S + 30

    def applies(self, ctx: ProbeContext) -> bool:
        # The GPU count is not known yet: collect() decides "one GPU → not applicable".
        return not ctx.fast and ctx.smoke

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        nvml: Any = None
        try:
            nvml = self._nvml_loader()
            counted = call_with_deadline(lambda: topology.nvml_gpu_count(nvml), ctx.timeout, "nccl-nvml")
            if counted.timed_out:
                raise TimeoutError(f"NVML did not answer in {ctx.timeout:g} s")
            if counted.error is not None:
                raise counted.error
            count = visible_count(int(counted.value or 0), ctx.env.get("CUDA_VISIBLE_DEVICES"))
        except Exception as exc:  # no NVML: the all-reduce cannot be sized, say why
            reason = f"cannot count GPUs: NVML: {topology.nvml_error(exc)}"
            facts.mark_unknown("nccl.status", reason)
            _mark_results_unknown(facts, reason)
            return facts
        facts.set("nccl.visible_gpus", count)
        if count < 2:
            reason = "one GPU" if count == 1 else "no GPU visible"
            facts.set("nccl.status", "not_applicable")
            facts.set("nccl.reason", reason)
            facts.set("nccl.error", None)
            facts.set("nccl.world_size", count)
            _mark_results_unknown(facts, f"not applicable: {reason}")
            return facts

        links = call_with_deadline(lambda: topology.nvlink_facts(nvml), ctx.timeout, "nccl-nvlink")
        if links.value is not None:
            facts.merge(links.value)
        else:
            why = f"NVML did not answer in {ctx.timeout:g} s" if links.timed_out else f"NVML: {links.error}"
            facts.mark_unknown("nvlink", why)
        facts.merge(topology.topo_facts(ctx))
        timeout = ctx.smoke_timeout + _GROUP_SLACK_S
        result = runner.run_group(
            ctx.python,
            count,
            backend=self._backend,
            timeout=timeout,
            env=ctx.env,
            sizes=self._sizes,
            iters=self._iters,
            warmup=self._warmup,
        )
        facts.merge(result_facts(result))
        return facts


def result_facts(result: runner.GroupResult) -> Facts:
    """Turn the group's outcome into ``nccl.*`` facts."""
    facts = Facts()
    facts.set("nccl.world_size", result.world_size)
    facts.set("nccl.seconds", round(result.seconds, 3))
    if result.status != "ok":
        facts.set("nccl.status", result.status)
        facts.set("nccl.error", result.error)
        _mark_results_unknown(facts, result.error or result.status)
        return facts
    sum_ok = bool(result.sum_ok)
    wrong = [r.get("rank") for r in result.ranks if not r.get("sum_ok")]
    facts.set("nccl.status", "ok" if sum_ok else "failed")
    facts.set(
        "nccl.error", None if sum_ok else "all-reduce returned a wrong sum on rank " + ", ".join(str(w) for w in wrong)
    )
    facts.set("nccl.sum_ok", sum_ok)
    facts.set("nccl.backend", result.ranks[0].get("backend"))
    busbw = {size: round(v, 3) for size, v in result.busbw_gbps().items()}
    facts.set("nccl.busbw_gbps", busbw)
    facts.set("nccl.busbw_peak_gbps", max(busbw.values()) if busbw else None)
    facts.set("nccl.per_rank_seconds", _rounded(runner.per_rank(result, "local_seconds")))
    facts.set("nccl.per_rank_allreduce_seconds", _rounded(runner.per_rank(result, "allreduce_seconds")))
    facts.set("nccl.per_rank_init_seconds", _rounded(runner.per_rank(result, "init_seconds")))
    names = runner.per_rank(result, "device_name")
    facts.set("nccl.device_names", names)
    facts.set("nccl.device_capabilities", runner.per_rank(result, "device_capability"))
    rank0 = result.rank0()
    if "p2p" in rank0:
        facts.set("nccl.p2p", rank0["p2p"])
    else:
        facts.mark_unknown("nccl.p2p", "peer access is measured on GPUs only")
    if rank0.get("nccl_version") is not None:
        facts.set("nccl.version", rank0["nccl_version"])
    else:
        facts.mark_unknown("nccl.version", str(rank0.get("nccl_version_error") or "not a CUDA build of torch"))
    return facts


def _rounded(values: list[Any]) -> list[Any]:
    return [round(v, 6) if isinstance(v, float) else v for v in values]


def _mark_results_unknown(facts: Facts, reason: str) -> None:
    for name in ("sum_ok", "busbw_gbps", "busbw_peak_gbps", "per_rank_seconds", "p2p"):
        facts.mark_unknown(f"nccl.{name}", reason)


#: The registry entry (``cuda_doctor.probes.PHASE_2``) reads this.
PROBE = NcclProbe()

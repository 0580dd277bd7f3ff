"""The NCCL probe: an all-reduce across all visible GPUs, one rank each, plus interconnect facts.
One GPU runs only with ``--nccl``: a one-rank all-reduce measures no bandwidth and no links."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cuda_doctor.base.deadline import Outcome, call_with_deadline
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import binding
from cuda_doctor.nccl import runner, topology

#: Extra seconds on top of ``ctx.smoke_timeout``: N processes import torch and set up NCCL.
_GROUP_SLACK_S = 60.0
#: The all-reduce's results, unknown with one reason when it did not run.
_RESULTS = ("nccl.sum_ok", "nccl.busbw_gbps", "nccl.busbw_peak_gbps", "nccl.per_rank_seconds", "nccl.p2p")


def visible_count(
    nvml_count: int,
    cuda_visible_devices: str | None,
    uuids: Sequence[str] = (),
    mig_parents: Mapping[str, int] | None = None,
) -> int:
    """How many CUDA devices a process will see, read as the CUDA_VISIBLE_DEVICES rule reads it; UUID
    and MIG entries are taken on trust where ``uuids`` or ``mig_parents`` are not known."""
    from cuda_doctor.gpu.visible_devices import visible_devices

    visible = visible_devices(cuda_visible_devices, nvml_count, list(uuids), mig_parents).visible
    return nvml_count if visible is None else visible


@dataclass
class NcclProbe:
    nvml_loader: Callable[[], Any] = binding.load
    backend: str = "nccl"
    sizes: tuple[int, ...] = runner.DEFAULT_SIZES
    iters: int = 20
    warmup: int = 5
    name = "nccl"

    def deadline(self, ctx: ProbeContext) -> float:
        # one NVML conversation and `nvidia-smi topo -m`, each within ctx.timeout, then the ranks
        return 2 * ctx.timeout + ctx.smoke_timeout + _GROUP_SLACK_S + 30

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast and ctx.smoke

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        read = call_with_deadline(lambda: topology.read_nvml(self.nvml_loader()), ctx.timeout, "nccl-nvml")
        nvml = read.value
        if nvml is None or nvml.uuids is None:  # no NVML: the all-reduce cannot be sized, say why
            reason = f"cannot count GPUs: {_why_uncounted(read, ctx.timeout)}"
            facts.mark_all_unknown(("nccl.status", *_RESULTS), reason)
            return facts
        count = visible_count(len(nvml.uuids), ctx.env.get("CUDA_VISIBLE_DEVICES"), nvml.uuids, nvml.mig_parents)
        facts.set("nccl.visible_gpus", count)
        if count == 1 and ctx.nccl:
            facts.merge(self._run(ctx, 1))
            return facts
        if count < 2:
            reason = "one GPU" if count == 1 else "no GPU visible"
            facts.set("nccl.status", "not_applicable")
            facts.set("nccl.reason", reason)
            facts.set("nccl.error", None)
            facts.set("nccl.world_size", count)
            facts.mark_all_unknown(_RESULTS, f"not applicable: {reason}")
            return facts
        facts.merge(nvml.facts)
        facts.merge(topology.topo_facts(ctx))
        facts.merge(self._run(ctx, count))
        return facts

    def _run(self, ctx: ProbeContext, count: int) -> Facts:
        # one rank measures no bandwidth: one small message, once, is the whole smoke
        sizes, iters, warmup = ((min(self.sizes),), 1, 1) if count == 1 else (self.sizes, self.iters, self.warmup)
        timeout = ctx.smoke_timeout + _GROUP_SLACK_S
        result = runner.run_group(
            ctx.python,
            count,
            backend=self.backend,
            timeout=timeout,
            env=ctx.env,
            sizes=sizes,
            iters=iters,
            warmup=warmup,
        )
        facts = result_facts(result)
        facts.set("nccl.nvls_enable", runner.nvls_setting(ctx.env))
        return facts


def _why_uncounted(read: Outcome[topology.NvmlTopology], timeout: float) -> str:
    if read.timed_out:
        return f"NVML did not answer in {timeout:g} s"
    if read.error is not None:
        return f"NVML: {binding.describe(read.error)}"
    return (read.value and read.value.facts.reason("nvlink")) or "NVML gave no answer"


def result_facts(result: runner.GroupResult) -> Facts:
    """Turn the group's outcome into ``nccl.*`` facts."""
    facts = Facts()
    facts.set("nccl.world_size", result.world_size)
    facts.set("nccl.seconds", round(result.seconds, 3))
    if result.status != "ok":
        facts.set("nccl.status", result.status)
        facts.set("nccl.error", result.error)
        facts.mark_all_unknown(_RESULTS, result.error or result.status)
        return facts
    sum_ok = bool(result.sum_ok)
    wrong = ", ".join(str(r.get("rank")) for r in result.ranks if not r.get("sum_ok"))
    facts.set("nccl.status", "ok" if sum_ok else "failed")
    facts.set("nccl.error", None if sum_ok else f"all-reduce returned a wrong sum on rank {wrong}")
    facts.set("nccl.sum_ok", sum_ok)
    facts.set("nccl.backend", result.ranks[0].get("backend"))
    if result.world_size == 1:  # bus bandwidth is 2(n-1)/n × algbw: nothing crosses a link
        reason = "one rank: the all-reduce moves no data between GPUs"
        facts.mark_all_unknown(("nccl.busbw_gbps", "nccl.busbw_peak_gbps"), reason)
    else:
        busbw = {size: round(v, 3) for size, v in result.busbw_gbps().items()}
        facts.set("nccl.busbw_gbps", busbw)
        facts.set("nccl.busbw_peak_gbps", max(busbw.values()) if busbw else None)
    facts.set("nccl.per_rank_seconds", _rounded(runner.per_rank(result, "local_seconds")))
    facts.set("nccl.per_rank_allreduce_seconds", _rounded(runner.per_rank(result, "allreduce_seconds")))
    facts.set("nccl.per_rank_init_seconds", _rounded(runner.per_rank(result, "init_seconds")))
    facts.set("nccl.device_names", runner.per_rank(result, "device_name"))
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


PROBE = NcclProbe()

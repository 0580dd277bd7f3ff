"""The NCCL probe: an all-reduce across all visible GPUs plus interconnect facts.

Runs only as part of the smoke run (never under ``--fast``).  The GPU count is learned here
(NVML, narrowed by ``CUDA_VISIBLE_DEVICES``).  With two or more GPUs it runs one rank per GPU;
with one GPU, only when asked for (``--nccl``): a one-rank communicator is a real NCCL
initialisation (bootstrap, topology detection, proxy) and its all-reduce a real collective, but
it moves no data between GPUs, so the bandwidth and the links are not measured.  Two ranks on
one GPU are an error since NCCL 2.5, so one GPU is always one rank.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cuda_doctor.base.deadline import Outcome, call_with_deadline
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import binding
from cuda_doctor.nccl import runner, topology

#: Extra seconds on top of ``ctx.smoke_timeout``: N processes import torch and set up NCCL.
_GROUP_SLACK_S = 60.0


def visible_count(
    nvml_count: int,
    cuda_visible_devices: str | None,
    uuids: Sequence[str] = (),
    mig_parents: Mapping[str, int] | None = None,
) -> int:
    """How many CUDA devices a process will see, given NVML's count and CUDA_VISIBLE_DEVICES,
    read as the CUDA_VISIBLE_DEVICES rule reads it (``gpu.visible_devices``).  UUID
    entries are taken on trust where ``uuids`` are not known; MIG ones where ``mig_parents`` are not."""
    from cuda_doctor.gpu.visible_devices import visible_devices

    visible = visible_devices(cuda_visible_devices, nvml_count, list(uuids), mig_parents).visible
    return nvml_count if visible is None else visible


class NcclProbe:
    name = "nccl"

    def __init__(
        self,
        nvml_loader: Callable[[], Any] = binding.load,
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
        # one NVML conversation and `nvidia-smi topo -m`, each within ctx.timeout, then the ranks
        return 2 * ctx.timeout + ctx.smoke_timeout + _GROUP_SLACK_S + 30

    def applies(self, ctx: ProbeContext) -> bool:
        # The GPU count is not known yet: collect() decides "one GPU → not applicable".
        return not ctx.fast and ctx.smoke

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        read = call_with_deadline(lambda: topology.read_nvml(self._nvml_loader()), ctx.timeout, "nccl-nvml")
        nvml = read.value
        if nvml is None or nvml.uuids is None:  # no NVML: the all-reduce cannot be sized, say why
            reason = f"cannot count GPUs: {_why_uncounted(read, ctx.timeout)}"
            facts.mark_unknown("nccl.status", reason)
            _mark_results_unknown(facts, reason)
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
            _mark_results_unknown(facts, f"not applicable: {reason}")
            return facts
        facts.merge(nvml.facts)
        facts.merge(topology.topo_facts(ctx))
        facts.merge(self._run(ctx, count))
        return facts

    def _run(self, ctx: ProbeContext, count: int) -> Facts:
        # one rank measures no bandwidth: one small message, once, is the whole smoke
        sizes, iters, warmup = ((min(self._sizes),), 1, 1) if count == 1 else (self._sizes, self._iters, self._warmup)
        result = runner.run_group(
            ctx.python,
            count,
            backend=self._backend,
            timeout=ctx.smoke_timeout + _GROUP_SLACK_S,
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
    if result.world_size == 1:  # bus bandwidth is 2(n-1)/n × algbw: nothing crosses a link
        for name in ("busbw_gbps", "busbw_peak_gbps"):
            facts.mark_unknown(f"nccl.{name}", "one rank: the all-reduce moves no data between GPUs")
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


def _mark_results_unknown(facts: Facts, reason: str) -> None:
    for name in ("sum_ok", "busbw_gbps", "busbw_peak_gbps", "per_rank_seconds", "p2p"):
        facts.mark_unknown(f"nccl.{name}", reason)


#: The registry entry (``cuda_doctor.core.families.PROBES``) reads this.
PROBE = NcclProbe()

"""Derived facts for the outlier rule (CD805): GPUs slower than their identical siblings in one
node, by NCCL's per-rank local workload and by the smoke figures.  Never raises."""

from __future__ import annotations

from cuda_doctor.core.facts import Facts, indexed

#: A rank this many times slower than the median of the ranks on identical GPUs is an outlier.
OUTLIER_FACTOR = 1.5


def derive(facts: Facts) -> None:
    """The ranks that lag (NCCL's local workload) and the GPUs whose smoke figures lag, together."""
    out = "derived.outliers"
    found: list[str] = []
    basis: list[str] = []
    missing: str | None = None
    if facts.get("derived.nccl.pair_skip_reason") is None and facts.has("derived.nccl.pair_skip_reason"):
        ranks = facts.get("derived.nccl.outlier_ranks")
        if isinstance(ranks, list):
            found += [str(r) for r in ranks]
            times = facts.get("nccl.per_rank_seconds")
            listed = times if isinstance(times, list) else []
            shown = ", ".join(f"{t:g}" if isinstance(t, (int, float)) else "not timed" for t in listed)
            basis.append(f"each NCCL rank's local workload within {OUTLIER_FACTOR:g}x of the median: {shown} s")
        else:
            missing = facts.reason("derived.nccl.outlier_ranks") or "no per-rank timings"
    smoke = _smoke_outliers(facts)
    if smoke is not None:
        found += smoke[0]
        basis.append(smoke[1])
    if basis:
        facts.set(f"{out}.skip_reason", None)
        facts.set(f"{out}.found", found)
        facts.set(f"{out}.basis", "; ".join(basis))
        return
    if missing is not None:
        facts.set(f"{out}.skip_reason", None)
        facts.mark_unknown(f"{out}.found", missing)
        return
    reason = facts.get("derived.nccl.pair_skip_reason") or facts.reason("derived.nccl.pair_skip_reason")
    facts.set(f"{out}.skip_reason", reason or "no figures to compare between GPUs")


def _smoke_outliers(facts: Facts) -> tuple[list[str], str] | None:
    """GPUs whose smoke figures lag their identical siblings' by the fleet's ratio; None if none compare."""
    smoke = facts.indices("smoke")
    if not smoke:
        return None
    from cuda_doctor.compare.fleet import MIN_GROUP, SLOW_RATIO  # only when there are figures

    found: list[str] = []
    compared: list[str] = []
    models = {i: _smoke_model(facts, i) for i in smoke}
    for model in sorted({m for m in models.values() if isinstance(m, str)}):
        members = [i for i in smoke if models[i] == model]
        if len(members) >= MIN_GROUP:
            compared.append(f"{len(members)} {model}")
            found += _lagging(facts, model, members, MIN_GROUP)
    if not compared:
        return None
    return found, f"the smoke figures of {' and '.join(compared)} GPUs within {SLOW_RATIO:g}x of their median"


def _smoke_model(facts: Facts, i: int) -> object:
    """The name of the GPU with CUDA ordinal i: the smoke run's, torch's, then NVML's."""
    names = facts.get("torch.device_names")
    torch_name = names[i] if isinstance(names, list) and i < len(names) else None
    return facts.get(indexed("smoke", i, "name")) or torch_name or facts.get(indexed("gpu", i, "name"))


def _lagging(facts: Facts, model: str, members: list[int], least: int) -> list[str]:
    from statistics import median

    from cuda_doctor.compare.fleet import SLOW_RATIO
    from cuda_doctor.compare.keys import METRICS

    found = []
    for metric in METRICS:
        values = {i: facts.get(indexed("smoke", i, metric.key)) for i in members}
        numbers = {i: float(v) for i, v in values.items() if isinstance(v, (int, float)) and v > 0}
        if len(numbers) < least:
            continue
        mid = median(numbers.values())
        for i, v in numbers.items():
            ratio = v / mid
            if (ratio < SLOW_RATIO) if metric.higher_is_better else (ratio > 1 / SLOW_RATIO):
                shown = f"{metric.label} {v:g} {metric.unit} vs median {mid:g} ({ratio:.2f}x)"
                found.append(f"GPU {i} ({model}): {shown}")
    return found

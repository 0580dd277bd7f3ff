"""Many nodes side by side: the majority configuration, the nodes that differ from it, the failing
rules per node, and performance outliers per GPU model (median and MAD: one broken node cannot drag them)."""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from cuda_doctor.compare.diff import DEFAULT_NOISE
from cuda_doctor.compare.keys import METRICS, Metric, number, smoke_indices, smoke_keys
from cuda_doctor.core.reportfile import Fields, ReportFileError, SavedReport, gc_paused
from cuda_doctor.core.results import Status

#: Robust z-score above which a figure is an outlier (Iglewicz & Hoaglin's 3.5).
Z_LIMIT = 3.5
#: Scale that makes the MAD estimate a standard deviation for normally distributed data.
MAD_SCALE = 1.4826
#: A figure this far below the group's median is flagged even when the MAD is 0 (or tiny).
SLOW_RATIO = 0.8
#: Fewer GPUs than this of one model: no median worth comparing against.
MIN_GROUP = 3

#: Keeps ``_unremarkable``'s band inside what ``_judge`` would pass, whatever the rounding.
_MARGIN = 1e-9
_PLAIN_NUMBERS = frozenset({int, float})
_FAILING = (Status.FAIL, Status.ERROR)
#: The facts a node's configuration is made of (gpu[i].name and the smoke figures besides).
_CONFIG_FACTS = (
    "driver.version", "driver.cuda_version", "torch.version", "torch.cuda_build", "torch.nccl_version", "gpu.count",
    "torch.device_names", "system.hostname",
)  # fmt: skip
#: One group of figures: the values, and for each the (report, CUDA ordinal) it belongs to.
_Group = tuple[list[float], list[tuple[SavedReport, int]]]


@dataclass(frozen=True)
class NodeConfig:
    """The configuration tuple nodes are grouped by; None means the report did not know it."""

    driver: Any
    cuda_driver: Any
    torch: Any
    torch_cuda: Any
    nccl: Any
    gpu_model: Any
    gpu_count: Any


CONFIG_LABELS: dict[str, str] = {
    "driver": "NVIDIA driver", "cuda_driver": "CUDA (driver API)", "torch": "torch", "torch_cuda": "torch CUDA build",
    "nccl": "NCCL", "gpu_model": "GPU model", "gpu_count": "GPU count",
}  # fmt: skip


@dataclass(frozen=True)
class Node:
    host: str
    path: str
    config: NodeConfig
    failing: tuple[str, ...]  # "CD101" or "CD301 (GPU 3)"
    warnings: int
    created: str | None


@dataclass(frozen=True)
class FieldDifference:
    field: str
    label: str
    value: Any
    majority: Any


@dataclass(frozen=True)
class NodeDifference:
    host: str
    path: str
    differences: tuple[FieldDifference, ...]


@dataclass(frozen=True)
class GroupStats:
    gpu_model: str
    metric: str
    label: str
    unit: str
    count: int
    median: float
    mad: float


@dataclass(frozen=True)
class Outlier:
    host: str
    path: str
    gpu: int
    gpu_model: str
    metric: str
    label: str
    unit: str
    value: float
    median: float
    ratio: float  # value / median
    z: float | None  # robust z-score; None when the group's MAD is 0
    direction: str  # "slow" | "fast"


@dataclass(frozen=True)
class Fleet:
    nodes: tuple[Node, ...]
    errors: tuple[ReportFileError, ...]
    majority: NodeConfig | None
    majority_count: int
    majority_tied: bool  # another configuration is just as common
    differing: tuple[NodeDifference, ...]
    outliers: tuple[Outlier, ...]
    stats: tuple[GroupStats, ...]
    duplicates: tuple[str, ...]  # hosts with more than one report
    noise: float
    repeated: tuple[str, ...] = ()  # paths given more than once, counted once
    tied_with: tuple[NodeConfig, ...] = ()  # the others as common as the majority
    figures: tuple[tuple[float, ...], ...] = ()  # for each of ``stats``, its group's figures, sorted

    @property
    def failing(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.failing)

    @property
    def uniform(self) -> bool:
        """Every report read, every node like the majority, no failing rules, no outliers."""
        return not (self.errors or self.differing or self.failing or self.outliers)


def _gpu_names(report: SavedReport) -> dict[int, str]:
    """NVML index → name, from ``gpu[i].name``, probed by index rather than scanning every fact."""
    out: dict[int, str] = {}
    count = number(report.get("gpu.count"))
    limit = int(count) if count is not None else 0
    for i in range(4097):  # a bound, whatever gpu.count says
        if i >= limit and f"gpu[{i}].name" not in report.values:
            break
        name = report.values.get(f"gpu[{i}].name")
        if isinstance(name, str):
            out[i] = name
    return out


def fleet_facts(values: Mapping[str, Any]) -> dict[str, Any]:
    """The facts ``compare_fleet`` reads, picked the way it reads them (``FLEET_FIELDS``)."""
    report = SavedReport("", "", None, None, 0, values, {})
    kept = {name: values[name] for name in _CONFIG_FACTS if name in values}
    for i in _gpu_names(report):
        kept[f"gpu[{i}].name"] = values[f"gpu[{i}].name"]
    for i in smoke_indices(report):
        keys = smoke_keys(i)
        figures = [key for key in keys[: len(METRICS)] if key in values]
        # The figures; a GPU without any keeps one smoke check, so that the GPUs after it are found.
        for key in figures or [key for key in keys[len(METRICS) :] if key in values][:1]:
            kept[key] = values[key]
    return kept


#: What a fleet keeps of each report it reads: ``load_unique(paths, FLEET_FIELDS)``.
FLEET_FIELDS = Fields(facts=fleet_facts, statuses=frozenset({*_FAILING, Status.WARN}))


def _smoke_models(report: SavedReport, nvml_names: dict[int, str]) -> dict[int, str]:
    """CUDA ordinal → GPU name for the smoke figures (torch's order when it said so)."""
    torch_names = report.get("torch.device_names")
    out: dict[int, str] = {}
    for i in smoke_indices(report):
        if isinstance(torch_names, list) and i < len(torch_names) and isinstance(torch_names[i], str):
            out[i] = torch_names[i]
        elif i in nvml_names:
            out[i] = nvml_names[i]
    return out


def _node(report: SavedReport, names: dict[int, str]) -> Node:
    """``names`` is ``_gpu_names(report)``."""
    failing: list[str] = []
    warnings = 0
    for r in report.results:
        if r.status in _FAILING:
            failing.append(f"{r.rule_id} ({r.subject})" if r.subject else r.rule_id)
        elif r.status == Status.WARN:
            warnings += 1
    models = sorted(set(names.values()))
    config = NodeConfig(
        driver=report.get("driver.version"),
        cuda_driver=report.get("driver.cuda_version"),
        torch=report.get("torch.version"),
        torch_cuda=report.get("torch.cuda_build"),
        nccl=report.get("torch.nccl_version"),
        gpu_model=", ".join(models) if models else None,
        gpu_count=report.get("gpu.count"),
    )
    return Node(report.host, report.path, config, tuple(failing), warnings, report.created)


def compare_fleet(
    reports: list[SavedReport],
    errors: list[ReportFileError] | tuple[ReportFileError, ...] = (),
    noise: float = DEFAULT_NOISE,
    repeated: list[str] | tuple[str, ...] = (),
) -> Fleet:
    with gc_paused():
        names = [_gpu_names(r) for r in reports]
        nodes = [_node(r, n) for r, n in zip(reports, names, strict=True)]
        majority, majority_count, tied_with = _majority([n.config for n in nodes])
        differing = tuple(
            NodeDifference(n.host, n.path, _differences(n.config, majority))
            for n in nodes
            if majority is not None and n.config != majority
        )
        stats, outliers, figures = _outliers(reports, names, noise)
    host_counts = Counter(n.host for n in nodes)
    return Fleet(
        nodes=tuple(nodes),
        errors=tuple(errors),
        majority=majority,
        majority_count=majority_count,
        majority_tied=bool(tied_with),
        tied_with=tied_with,
        repeated=tuple(repeated),
        differing=differing,
        outliers=outliers,
        stats=stats,
        figures=figures,
        duplicates=tuple(sorted(h for h, c in host_counts.items() if c > 1)),
        noise=noise,
    )


def _known_fields(config: NodeConfig) -> int:
    return sum(getattr(config, f.name) is not None for f in fields(NodeConfig))


def _majority(configs: list[NodeConfig]) -> tuple[NodeConfig | None, int, tuple[NodeConfig, ...]]:
    """The most common configuration (one with nothing known only if there is no other), its count and
    those just as common; a tie goes to the most fields known, then the smallest by shown values."""
    counts = Counter(configs)
    candidates = {c: n for c, n in counts.items() if _known_fields(c)} or counts
    if not candidates:
        return None, 0, ()
    best = max(candidates.values())
    tied = sorted(
        (c for c, n in candidates.items() if n == best),
        key=lambda c: (-_known_fields(c), [str(getattr(c, f.name)) for f in fields(NodeConfig)]),
    )
    return tied[0], best, tuple(tied[1:])


def _differences(config: NodeConfig, majority: NodeConfig) -> tuple[FieldDifference, ...]:
    pairs = ((f.name, getattr(config, f.name), getattr(majority, f.name)) for f in fields(NodeConfig))
    return tuple(
        FieldDifference(name, CONFIG_LABELS[name], mine, theirs) for name, mine, theirs in pairs if mine != theirs
    )


def _outliers(
    reports: list[SavedReport], names: list[dict[int, str]], noise: float
) -> tuple[tuple[GroupStats, ...], tuple[Outlier, ...], tuple[tuple[float, ...], ...]]:
    stats: list[GroupStats] = []
    outliers: list[Outlier] = []
    figures: list[tuple[float, ...]] = []
    groups = _figures(reports, names)
    for model, metric in sorted(groups, key=lambda g: (g[0], g[1].key)):
        values, owners = groups[(model, metric)]
        ordered = tuple(sorted(values))
        figures.append(ordered)
        median = _median(ordered)
        mad = _median(_deviations(ordered, median))
        stats.append(GroupStats(model, metric.key, metric.label, metric.unit, len(values), median, mad))
        if len(values) < MIN_GROUP or median <= 0:
            continue
        low, high = _unremarkable(median, mad, noise, metric)
        for (report, gpu), value in zip(owners, values, strict=True):
            if low <= value <= high:
                continue
            found = _judge(value, median, mad, noise, metric)
            if found is not None:
                z, direction = found
                about = (report.host, report.path, gpu, model, metric.key, metric.label, metric.unit)
                outliers.append(Outlier(*about, value, median, value / median, z, direction))
    outliers.sort(key=lambda o: (o.direction != "slow", o.host, o.gpu, o.metric))
    return tuple(stats), tuple(outliers), tuple(figures)


def _median(ordered: Sequence[float]) -> float:
    """``statistics.median`` of values already sorted."""
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _deviations(ordered: Sequence[float], median: float) -> list[float]:
    """``|v - median|`` of sorted values, sorted: two ascending runs, which one merge sorts."""
    split = bisect.bisect_left(ordered, median)
    out = [median - v for v in reversed(ordered[:split])]
    out += [v - median for v in ordered[split:]]
    out.sort()
    return out


def _figures(reports: list[SavedReport], names: list[dict[int, str]]) -> dict[tuple[str, Metric], _Group]:
    """(GPU model, metric) → the positive figures of GPUs of that model, in report order."""
    by_model: defaultdict[str, list[_Group]] = defaultdict(lambda: [([], []) for _ in METRICS])
    for report, nvml_names in zip(reports, names, strict=True):
        for i, model in _smoke_models(report, nvml_names).items():
            values: Iterable[Any] = map(report.values.get, smoke_keys(i)[: len(METRICS)])
            for (figures, owners), value in zip(by_model[model], values, strict=True):
                # number(), its common case first: this runs for every figure of every GPU
                if (value.__class__ in _PLAIN_NUMBERS or number(value) is not None) and value > 0:
                    figures.append(float(value))
                    owners.append((report, i))
    return {
        (model, metric): group
        for model, groups in by_model.items()
        for metric, group in zip(METRICS, groups, strict=True)
        if group[0]
    }


def _unremarkable(median: float, mad: float, noise: float, metric: Metric) -> tuple[float, float]:
    """A band around the median in which ``_judge`` finds no outlier: only figures outside it are judged."""
    # Not an outlier by z when within Z_LIMIT robust deviations or within the noise band.
    reach = max(Z_LIMIT * MAD_SCALE * mad, noise * median) if mad > 0 else float("inf")
    # value - median carries a rounding error of the median's magnitude, however small the reach
    reach = reach * (1 - _MARGIN) - abs(median) * _MARGIN
    low, high = median - reach, median + reach
    if metric.higher_is_better:
        low = max(low, median * SLOW_RATIO * (1 + _MARGIN))
    else:
        high = min(high, median / SLOW_RATIO * (1 - _MARGIN))
    return low, high


def _judge(value: float, median: float, mad: float, noise: float, metric: Metric) -> tuple[float | None, str] | None:
    """(z, "slow"|"fast") when ``value`` is an outlier in its group, else None."""
    ratio = value / median
    worse = ratio < 1 if metric.higher_is_better else ratio > 1
    direction = "slow" if worse else "fast"
    z = (value - median) / (MAD_SCALE * mad) if mad > 0 else None
    # A tight group makes tiny wobbles statistically extreme; require the noise band too.
    by_z = z is not None and abs(z) > Z_LIMIT and abs(ratio - 1) > noise
    below_floor = ratio < SLOW_RATIO if metric.higher_is_better else ratio > 1 / SLOW_RATIO
    return (z, direction) if by_z or below_floor else None

"""The NVIDIA Container Toolkit's ``NVIDIA_REQUIRE_*`` check (libnvidia-container's dsl.c), as a pure function:
each but ``_JETPACK`` must hold; in one, space-separated clauses are OR-ed and comma-separated constraints
AND-ed; ``cuda``/``driver`` compare versions, ``arch``/``brand`` each visible GPU (and hold with none).
An unknown brand or arch stays unknown, never assumed."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}  # Go's strconv.ParseBool

_OPERATORS = ("!=", "<=", ">=", "=", "<", ">")  # longest first
_VERSION = re.compile(r"^[0-9.]+$")


class HostGPU(NamedTuple):
    """What the toolkit reads of one visible GPU; ``None`` where we could not learn it."""

    brand: str | None = None
    arch: str | None = None  # compute capability, "9.0"


class Host(NamedTuple):
    """The host a requirement is judged against; ``gpus``: None when unknown, ``()`` when none."""

    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[HostGPU, ...] | None = None


class RequireResult(NamedTuple):
    satisfied: bool | None  # None: a fact the decision needs is unknown
    detail: str  # the toolkit's message when unsatisfied, else what was decided and why
    failing: str | None  # the failing constraint ("cuda>=12.2"), or the unknown one
    required_cuda: str | None  # the CUDA version the image asks for ("12.2")
    requirements: tuple[str, ...]  # the expressions that were judged
    disabled: bool = False
    cuda_satisfied: bool | None = None  # the ``cuda>=`` constraint alone


class InvalidExpression(ValueError):
    pass


def parse_bool(value: str | None) -> bool:
    """``NVIDIA_DISABLE_REQUIRE`` read as Go's ``strconv.ParseBool`` does (errors: false)."""
    return value is not None and value.strip() in _TRUE


def is_requirement(name: str) -> bool:
    return name.startswith("NVIDIA_REQUIRE_") and not name.startswith("NVIDIA_REQUIRE_JETPACK")


def requirements_from_env(env: Mapping[str, str]) -> tuple[list[str], bool, str | None]:
    """``(expressions, disabled, error)``: ``error`` when a legacy image's ``CUDA_VERSION`` is not a version."""
    if parse_bool(env.get("NVIDIA_DISABLE_REQUIRE")):
        return [], True, None
    exprs = [value for name, value in sorted(env.items()) if is_requirement(name)]
    legacy = env.get("CUDA_VERSION", "")
    if legacy and not env.get("NVIDIA_REQUIRE_CUDA"):
        major_minor = legacy_cuda_requirement(legacy)
        if major_minor is None:
            return exprs, False, f"invalid CUDA version: CUDA_VERSION={legacy!r}"
        exprs.append(f"cuda>={major_minor}")
    return exprs, False, None


def legacy_cuda_requirement(cuda_version: str) -> str | None:
    """``12.2.2`` → ``12.2`` (``12`` → ``12.0``) as the toolkit derives it; None if invalid."""
    match = re.fullmatch(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+][0-9A-Za-z.+-]*)?", cuda_version.strip())
    if match is None:
        return None
    return f"{int(match.group(1))}.{int(match.group(2) or 0)}"


def compare_versions(left: str, op: str, right: str) -> bool:
    """libnvidia-container's dotted-number comparison (missing components count as zero)."""
    if not _VERSION.match(left) or not _VERSION.match(right):
        raise InvalidExpression(f"not a version: {left!r} {op} {right!r}")
    a, b = ([int(part) for part in version.split(".") if part] for version in (left, right))
    width = max(len(a), len(b))
    a, b = a + [0] * (width - len(a)), b + [0] * (width - len(b))
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def split_constraint(text: str) -> tuple[str, str, str]:
    """``driver>=470`` → ("driver", ">=", "470"); raises InvalidExpression."""
    match = re.match(r"^([^<>=!]+)([<>=!]+)(.+)$", text)
    if match is None or match.group(2) not in _OPERATORS:
        raise InvalidExpression(f"invalid constraint {text!r}")
    name, op, value = match.group(1).lower(), match.group(2), match.group(3)
    if name not in ("cuda", "driver", "arch", "brand"):
        raise InvalidExpression(f"unknown constraint {name!r} in {text!r}")
    if name == "brand" and op not in ("=", "!="):
        raise InvalidExpression(f"brand takes = or != in {text!r}")
    return name, op, value


def _leaf(text: str, host: Host, gpu: HostGPU | None) -> tuple[bool | None, str | None]:
    """One constraint: (holds, reason-if-unknown)."""
    name, op, value = split_constraint(text)
    if name in ("cuda", "driver"):
        have = host.cuda_version if name == "cuda" else host.driver_version
        if have is None:
            return (None, f"the host's {'CUDA driver' if name == 'cuda' else 'driver'} version is unknown")
        return compare_versions(have, op, value), None
    if gpu is None:  # no GPU visible: the toolkit assumes brand and arch hold
        return True, None
    if name == "arch":
        if gpu.arch is None:
            return None, "the GPU's compute capability is unknown"
        return compare_versions(gpu.arch, op, value), None
    if gpu.brand is None:
        return None, "the GPU's brand is unknown"
    same = gpu.brand.strip().lower() == value.strip().lower()
    return (same if op == "=" else not same), None


def _evaluate_one(expr: str, host: Host, gpu: HostGPU | None) -> tuple[bool | None, str | None, str | None]:
    """One expression for one GPU, three-valued: (holds, failing-or-unknown constraint, unknown reason)."""
    unknown: tuple[str, str] | None = None
    last_false: str | None = None
    for clause in (c for c in expr.split(" ") if c):
        clause_value: bool | None = True
        clause_unknown: tuple[str, str] | None = None
        for constraint in (c for c in clause.split(",") if c):
            value, reason = _leaf(constraint, host, gpu)
            if value is False:
                clause_value = False
                last_false = constraint
                break
            if value is None:
                clause_value = None
                clause_unknown = clause_unknown or (constraint, reason or "unknown")
        if clause_value is True:
            return True, None, None
        if clause_value is None and unknown is None:
            unknown = clause_unknown
    if unknown is not None:
        return None, unknown[0], unknown[1]
    return False, last_false, None


def required_cuda(requirements: Sequence[str]) -> str | None:
    """The highest ``cuda>=X`` (or ``cuda>X``) version named by the requirements."""
    best: str | None = None
    for expr in requirements:
        for constraint in re.split(r"[ ,]", expr):
            match = re.fullmatch(r"(?i)cuda>=?([0-9.]+)", constraint)
            if match and (best is None or compare_versions(match.group(1), ">", best)):
                best = match.group(1)
    return best


def evaluate(requirements: Sequence[str], host: Host, *, disabled: bool = False) -> RequireResult:
    """Judge requirement expressions against a host as the toolkit would at container start."""
    reqs = tuple(r for r in requirements if r.strip())
    needed = required_cuda(reqs)  # never raises: it reads only digits and dots
    if disabled:
        return RequireResult(True, "NVIDIA_DISABLE_REQUIRE turns the requirement checks off", None, needed, reqs, True)
    if not reqs:
        return RequireResult(True, "the image states no NVIDIA_REQUIRE_* requirement", None, None, reqs)
    cuda_ok = True if needed is None else None  # whether the host meets ``cuda>=`` alone; None: not known
    if needed is not None and host.cuda_version is not None:
        try:
            cuda_ok = compare_versions(host.cuda_version, ">=", needed)
        except InvalidExpression:
            cuda_ok = None

    def result(satisfied: bool | None, detail: str, failing: str | None) -> RequireResult:
        return RequireResult(satisfied, detail, failing, needed, reqs, cuda_satisfied=cuda_ok)

    # once per visible GPU (once with none); with the GPUs unknown, for a GPU with nothing known
    targets: tuple[HostGPU | None, ...] = (HostGPU(),) if host.gpus is None else host.gpus or (None,)
    unknown: tuple[str, str] | None = None
    for gpu in targets:
        for expr in reqs:
            try:
                value, constraint, reason = _evaluate_one(expr, host, gpu)
            except InvalidExpression as exc:
                return result(False, f"requirement error: invalid expression ({exc})", expr)
            if value is False:
                return result(False, _unsatisfied_message(expr), constraint)
            if value is None and unknown is None:
                unknown = (constraint or expr, reason or "unknown")
    if unknown is not None:
        return result(None, f"cannot tell whether {unknown[0]} holds: {unknown[1]}", unknown[0])
    return result(True, "every NVIDIA_REQUIRE_* condition holds", None)


def _unsatisfied_message(expr: str) -> str:
    # libnvidia-container reports the expression's first clause, with advice for cuda>=.
    first = next((c for c in expr.split(" ") if c), expr)
    advice = ", please update your driver to a newer version, or use an earlier cuda container"
    return f"unsatisfied condition: {first}" + (advice if first.startswith("cuda>=") else "")


def check_env(env: Mapping[str, str], host: Host) -> RequireResult:
    """Judge an image's (or this container's) environment against a host."""
    exprs, disabled, error = requirements_from_env(env)
    if error is not None:
        return RequireResult(False, error, "CUDA_VERSION", None, tuple(exprs))
    return evaluate(exprs, host, disabled=disabled)

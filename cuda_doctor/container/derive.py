"""Derived container facts: image requirements judged for this host, tag status, torch variants.

Reads the probed facts (``container.*`` for the container we run in, ``image[i].*`` for local
images, ``driver.*`` and ``gpu[i].*`` for the host) and writes ``derived.container.*`` and
``derived.image[i].*``.  Never raises: a missing input leaves the output unknown with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cuda_doctor.container.require import Host, HostGPU, RequireResult, check_env
from cuda_doctor.facts import Facts, indexed

TAGS_TABLE = "nvidia_cuda_tags"
_CUDA_TAG = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)(?:\.(?P<patch>\d+))?(?:-(?P<suffix>.+))?$")


def derive(facts: Facts) -> None:
    host = host_from_facts(facts)
    _derive_container(facts, host)
    for i in facts.indices("image"):
        _derive_image(facts, i, host)


# -- the host ----------------------------------------------------------------------------------


def host_from_facts(facts: Facts) -> Host:
    gpus: tuple[HostGPU, ...] | None = None
    indices = facts.indices("gpu")
    if indices:
        gpus = tuple(
            HostGPU(
                brand=_str_or_none(facts.get(indexed("gpu", i, "brand"))),
                arch=_str_or_none(facts.get(indexed("gpu", i, "compute_capability"))),
            )
            for i in indices
        )
    elif facts.get("gpu.count") == 0:
        gpus = ()
    return Host(
        driver_version=_str_or_none(facts.get("driver.version")),
        cuda_version=_str_or_none(facts.get("driver.cuda_version")),
        gpus=gpus,
    )


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


# -- requirement -------------------------------------------------------------------------------


def _require_env(facts: Facts, prefix: str) -> dict[str, str]:
    env: dict[str, str] = {}
    extra = facts.get(f"{prefix}.require_env")
    if isinstance(extra, Mapping):
        env.update({str(k): str(v) for k, v in extra.items() if v is not None})
    require_cuda = facts.get(f"{prefix}.nvidia_require_cuda")
    if require_cuda:
        env["NVIDIA_REQUIRE_CUDA"] = str(require_cuda)
    cuda_version = facts.get(f"{prefix}.cuda_version")
    if cuda_version:
        env["CUDA_VERSION"] = str(cuda_version)
    if facts.get(f"{prefix}.nvidia_disable_require") is True:
        env["NVIDIA_DISABLE_REQUIRE"] = "true"
    return env


def _write_requirement(facts: Facts, out: str, result: RequireResult) -> None:
    facts.set(f"{out}.has_requirement", bool(result.requirements) or result.disabled)
    facts.set(f"{out}.require_detail", result.detail)
    facts.set(f"{out}.require_failing", result.failing)
    facts.set(f"{out}.required_cuda", result.required_cuda)
    facts.set(f"{out}.require_disabled", result.disabled)
    if result.satisfied is None:
        why = next(
            (facts.reason(n) for n in ("driver.version", "driver.cuda_version") if facts.reason(n)),
            None,
        )
        detail = f"{result.detail} ({why})" if why and "version is unknown" in result.detail else result.detail
        facts.mark_unknown(f"{out}.require_satisfied", detail)
    else:
        facts.set(f"{out}.require_satisfied", result.satisfied)
    facts.set(f"{out}.driver_needed", _driver_needed(result.required_cuda))


def _driver_needed(required: str | None) -> str | None:
    if required is None:
        return None
    try:
        from cuda_doctor.knowledge import min_driver_for_cuda

        return min_driver_for_cuda(required)
    except (ImportError, OSError, KeyError, ValueError):
        return None  # the table is optional here: the message then names the CUDA version only


_OUTPUTS = ("require_satisfied", "require_detail", "required_cuda", "has_requirement")


def _derive_container(facts: Facts, host: Host) -> None:
    out = "derived.container"
    inputs = ("container.nvidia_require_cuda", "container.cuda_version")
    if not any(facts.has(n) for n in inputs):
        reason = next((facts.reason(n) for n in inputs if facts.reason(n)), None)
        for n in _OUTPUTS:
            facts.mark_unknown(f"{out}.{n}", reason or "the container environment was not probed")
        return
    env = _require_env(facts, "container")
    result = check_env(env, host)
    _write_requirement(facts, out, result)


def _derive_image(facts: Facts, i: int, host: Host) -> None:
    prefix = f"image[{i}]"
    out = f"derived.image[{i}]"
    if facts.has(f"{prefix}.ref"):
        _derive_tag_status(facts, i)  # needs only the reference: a deleted tag is never local
    if facts.get(f"{prefix}.found") is not True:
        reason = facts.get(f"{prefix}.error") or facts.reason(f"{prefix}.found") or "the image was not inspected"
        for n in (*_OUTPUTS, "torch_cuda_mismatch", "suggested_image"):
            facts.mark_unknown(f"{out}.{n}", str(reason))
        return
    result = check_env(_require_env(facts, prefix), host)
    _write_requirement(facts, out, result)
    _derive_suggested_tag(facts, i, host)
    _derive_torch_mismatch(facts, i)


# -- nvidia/cuda tags --------------------------------------------------------------------------


def load_tags() -> list[dict[str, Any]] | str:
    """The ``[[minor]]`` rows of the tag table, or the reason it cannot be read."""
    try:
        from cuda_doctor.tables import load_table

        table = load_table(TAGS_TABLE)
    except FileNotFoundError:
        return f"rules/data/{TAGS_TABLE}.toml is missing"
    except (OSError, ValueError) as exc:  # TOMLDecodeError is a ValueError
        return f"rules/data/{TAGS_TABLE}.toml cannot be read: {exc}"
    rows = table.get("minor")
    if not isinstance(rows, list):
        return f"rules/data/{TAGS_TABLE}.toml has no [[minor]] rows"
    return [row for row in rows if isinstance(row, dict) and "version" in row]


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def tag_status(tag: str, rows: list[dict[str, Any]]) -> tuple[str, str | None, str | None]:
    """(status, latest tag of that minor with the same suffix, row's source) of an nvidia/cuda tag.

    Status: ``supported`` | ``superseded`` (an older patch of a supported minor) | ``eol`` |
    ``deleted`` | ``not_a_release_tag`` (e.g. ``latest`` or ``12.3-base``: no such tags exist) |
    ``unlisted`` (a release the table does not know yet).
    """
    match = _CUDA_TAG.match(tag)
    if match is None or match.group("patch") is None:
        return "not_a_release_tag", None, None
    minor = f"{int(match.group('major'))}.{int(match.group('minor'))}"
    row = next((r for r in rows if str(r.get("version")) == minor), None)
    if row is None:
        return "unlisted", None, None
    suffix = match.group("suffix")
    latest_patch = str(row.get("latest_patch") or "") or None
    latest_tag = f"{latest_patch}-{suffix}" if latest_patch and suffix else latest_patch
    status = str(row.get("status", "supported"))
    source = str(row["source"]) if row.get("source") else None
    if status == "supported" and latest_patch:
        patch = f"{minor}.{int(match.group('patch'))}"
        if _version_tuple(patch) < _version_tuple(latest_patch):
            status = "superseded"
    return status, latest_tag, source


def _derive_tag_status(facts: Facts, i: int) -> None:
    from cuda_doctor.container.reference import InvalidReference, is_nvidia_cuda, parse_reference

    out = f"derived.image[{i}]"
    ref_text = facts.get(f"image[{i}].ref")
    try:
        ref = parse_reference(str(ref_text))
    except InvalidReference:
        facts.set(f"{out}.tag_status", "invalid_reference")
        return
    if ref.is_id or not is_nvidia_cuda(ref.repository) or ref.tag is None:
        facts.set(f"{out}.tag_status", "not_nvidia_cuda")
        return
    rows = load_tags()
    if isinstance(rows, str):
        facts.mark_unknown(f"{out}.tag_status", rows)
        return
    status, latest, source = tag_status(ref.tag, rows)
    facts.set(f"{out}.tag_status", status)
    facts.set(
        f"{out}.tag_latest",
        f"{ref.path if ref.domain == 'docker.io' else ref.repository}:{latest}" if latest else None,
    )
    facts.set(f"{out}.tag_source", source)


def _derive_suggested_tag(facts: Facts, i: int, host: Host) -> None:
    """For an nvidia/cuda image this driver is too old for: the newest tag it can run."""
    from cuda_doctor.container.reference import InvalidReference, is_nvidia_cuda, parse_reference

    out = f"derived.image[{i}].suggested_image"
    try:
        ref = parse_reference(str(facts.get(f"image[{i}].ref")))
    except InvalidReference as exc:
        facts.mark_unknown(out, str(exc))
        return
    match = _CUDA_TAG.match(ref.tag or "")
    if ref.is_id or not is_nvidia_cuda(ref.repository) or match is None or host.cuda_version is None:
        facts.set(out, None)
        return
    rows = load_tags()
    if isinstance(rows, str):
        facts.mark_unknown(out, rows)
        return
    ceiling = _version_tuple(host.cuda_version)
    usable = [
        r
        for r in rows
        if r.get("status") != "deleted" and r.get("latest_patch") and _version_tuple(str(r["version"])) <= ceiling
    ]
    if not usable:
        facts.set(out, None)
        return
    best = max(usable, key=lambda r: _version_tuple(str(r["version"])))
    suffix = match.group("suffix")
    tag = f"{best['latest_patch']}-{suffix}" if suffix else str(best["latest_patch"])
    name = ref.path if ref.domain == "docker.io" else ref.repository
    facts.set(out, f"{name}:{tag}")


# -- torch variant -----------------------------------------------------------------------------


def _derive_torch_mismatch(facts: Facts, i: int) -> None:
    from cuda_doctor.versions import major_minor

    out = f"derived.image[{i}].torch_cuda_mismatch"
    variant = facts.get(f"image[{i}].torch_variant")
    base = facts.get(f"image[{i}].cuda_version")
    if not variant or not base:
        facts.mark_unknown(out, "the image has no torch CUDA variant and CUDA base to compare")
        return
    base_mm = major_minor(base)
    if str(variant) == "cpu":
        facts.set(out, base_mm is not None)
        return
    variant_mm = major_minor(variant)
    if base_mm is None or variant_mm is None:
        facts.mark_unknown(out, f"cannot compare torch variant {variant!r} with CUDA {base!r}")
        return
    facts.set(out, variant_mm != base_mm)
    facts.set(f"derived.image[{i}].torch_cuda_major_mismatch", variant_mm[0] != base_mm[0])

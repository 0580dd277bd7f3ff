"""``derived.container.*`` and ``derived.image[i].*``: image requirements judged for this host, tag
status, torch variants.  Never raises: a missing input leaves the output unknown with the reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cuda_doctor.container.require import Host, HostGPU, RequireResult, check_env
from cuda_doctor.core.facts import Facts, indexed


def derive(facts: Facts) -> None:
    host = host_from_facts(facts)
    _derive_container(facts, host)
    for i in facts.indices("image"):
        _derive_image(facts, i, host)


def host_from_facts(facts: Facts) -> Host:
    gpus: tuple[HostGPU, ...] | None = tuple(
        HostGPU(_text(facts, indexed("gpu", i, "brand")), _text(facts, indexed("gpu", i, "compute_capability")))
        for i in facts.indices("gpu")
    )
    if not gpus and facts.get("gpu.count") != 0:
        gpus = None  # not known to be none
    return Host(_text(facts, "driver.version"), _text(facts, "driver.cuda_version"), gpus)


def _text(facts: Facts, name: str) -> str | None:
    value = facts.get(name)
    return None if value is None else str(value)


def _require_env(facts: Facts, prefix: str) -> dict[str, str]:
    extra = facts.get(f"{prefix}.require_env")
    env = {str(k): str(v) for k, v in extra.items() if v is not None} if isinstance(extra, Mapping) else {}
    for name, fact in (("NVIDIA_REQUIRE_CUDA", "nvidia_require_cuda"), ("CUDA_VERSION", "cuda_version")):
        value = facts.get(f"{prefix}.{fact}")
        if value:
            env[name] = str(value)
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
        why = next((facts.reason(n) for n in ("driver.version", "driver.cuda_version") if facts.reason(n)), None)
        detail = f"{result.detail} ({why})" if why and "version is unknown" in result.detail else result.detail
        facts.mark_unknown(f"{out}.require_satisfied", detail)
    else:
        facts.set(f"{out}.require_satisfied", result.satisfied)
    facts.set(f"{out}.driver_needed", _driver_needed(result.required_cuda))


def _driver_needed(required: str | None) -> str | None:
    if required is None:
        return None
    try:
        from cuda_doctor.tables.driver import min_driver_for_cuda

        return min_driver_for_cuda(required)
    except (ImportError, OSError, KeyError, ValueError):
        return None  # the table is optional here: the message then names the CUDA version only


_OUTPUTS = ("require_satisfied", "require_detail", "required_cuda", "has_requirement")


def _derive_container(facts: Facts, host: Host) -> None:
    out = "derived.container"
    inputs = ("container.nvidia_require_cuda", "container.cuda_version")
    if not any(facts.has(n) for n in inputs):
        reason = next((facts.reason(n) for n in inputs if facts.reason(n)), None)
        facts.mark_all_unknown((f"{out}.{n}" for n in _OUTPUTS), reason or "the container environment was not probed")
        return
    result = check_env(_require_env(facts, "container"), host)
    _write_requirement(facts, out, result)
    facts.set(f"{out}.suggested_image", _newest_for(host) if result.satisfied is False else None)


def _newest_for(host: Host) -> str | None:
    """The newest supported nvidia/cuda base tag whose CUDA this driver runs."""
    from cuda_doctor.container import tags

    ceiling = tags.minor_of(host.cuda_version)
    return None if ceiling is None else _suggest_image("nvidia/cuda", None, ceiling=ceiling, flavour="base")


def _suggest_image(name: str, tag: str | None, **options: Any) -> str | None:
    """``name:`` the tag ``tags.suggest`` picks; None when there is none or no catalogue."""
    from cuda_doctor.container import tags

    try:
        suggested = tags.suggest(tag, **options)
    except tags.CatalogueError:
        return None
    return f"{name}:{suggested}" if suggested else None


def _derive_image(facts: Facts, i: int, host: Host) -> None:
    prefix = f"image[{i}]"
    if facts.has(f"{prefix}.ref"):
        _derive_tag_status(facts, i)  # needs only the reference: a deleted tag is never local
    if facts.get(f"{prefix}.found") is not True:
        reason = facts.get(f"{prefix}.error") or facts.reason(f"{prefix}.found") or "the image was not inspected"
        names = (*_OUTPUTS, "torch_cuda_mismatch", "suggested_image")
        facts.mark_all_unknown((f"derived.{prefix}.{n}" for n in names), str(reason))
        return
    _write_requirement(facts, f"derived.{prefix}", check_env(_require_env(facts, prefix), host))
    _derive_suggested_tag(facts, i, host)
    _derive_torch_mismatch(facts, i)


def _cuda_ref(facts: Facts, i: int) -> tuple[str, str | None] | str | None:
    """(repository as written, tag) of an nvidia/cuda image; None for another image; else why it is invalid."""
    from cuda_doctor.container.reference import InvalidReference, is_nvidia_cuda, parse_reference

    try:
        ref = parse_reference(str(facts.get(f"image[{i}].ref")))
    except InvalidReference as exc:
        return str(exc)
    if ref.is_id or not is_nvidia_cuda(ref.repository):
        return None
    return (ref.path if ref.domain == "docker.io" else ref.repository), ref.tag


def _derive_tag_status(facts: Facts, i: int) -> None:
    from cuda_doctor.container import tags

    out = f"derived.image[{i}]"
    found = _cuda_ref(facts, i)
    if isinstance(found, str):
        facts.set(f"{out}.tag_status", "invalid_reference")
        return
    if found is None or (found[1] is None and facts.get(f"image[{i}].found") is True):
        facts.set(f"{out}.tag_status", "not_nvidia_cuda")  # an id or a digest: no tag to judge
        return
    name, tag = found
    try:
        verdict = tags.judge(tag)
        # a torch inside pins the CUDA minor: the suggestion keeps it, so CD905 agrees with it
        minor = tags.minor_of(facts.get(f"image[{i}].torch_variant"))
        suggested = tags.suggest(tag, cuda_minor=minor)
    except tags.CatalogueError as exc:
        names = ("tag_status", "tag_certain", "tag_reason", "tag_suggested")
        facts.mark_all_unknown((f"{out}.{n}" for n in names), str(exc))
        return
    facts.set(f"{out}.tag_status", verdict.state)
    facts.set(f"{out}.tag_certain", verdict.certain)
    facts.set(f"{out}.tag_superseded", verdict.superseded)
    facts.set(f"{out}.tag_reason", verdict.reason)
    facts.set(f"{out}.tag_suggested", f"{name}:{suggested}" if suggested and suggested != tag else None)


def _derive_suggested_tag(facts: Facts, i: int, host: Host) -> None:
    """For an nvidia/cuda image this driver is too old for: the newest supported tag it runs."""
    from cuda_doctor.container import tags

    out = f"derived.image[{i}].suggested_image"
    found = _cuda_ref(facts, i)
    if isinstance(found, str):
        facts.mark_unknown(out, found)
        return
    ceiling = tags.minor_of(host.cuda_version)
    if found is None or ceiling is None:
        facts.set(out, None)
        return
    try:
        suggested = tags.suggest(found[1], ceiling=ceiling)
    except tags.CatalogueError as exc:
        facts.mark_unknown(out, str(exc))
        return
    facts.set(out, f"{found[0]}:{suggested}" if suggested else None)


def _derive_torch_mismatch(facts: Facts, i: int) -> None:
    from cuda_doctor.tables.versions import major_minor

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
    facts.set(f"derived.image[{i}].torch_base_image", _base_for_torch(facts, i, variant_mm))


def _base_for_torch(facts: Facts, i: int, minor: tuple[int, int]) -> str | None:
    """A supported nvidia/cuda tag of torch's CUDA minor: CD904's for an nvidia/cuda image, else devel."""
    found = _cuda_ref(facts, i)
    if isinstance(found, tuple):
        return _suggest_image(*found, cuda_minor=minor)
    return _suggest_image("nvidia/cuda", None, cuda_minor=minor, flavour="devel")

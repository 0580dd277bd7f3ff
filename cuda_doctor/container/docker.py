"""The Docker engine and the local GPU images (``--image`` first, then local ``nvidia/cuda``,
``pytorch/pytorch`` and ``nvcr.io/nvidia/*``), read through the optional docker SDK.  Every call is
bounded twice: the SDK's socket timeout, and a thread deadline for a daemon that never answers."""

from __future__ import annotations

import functools
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from cuda_doctor.base.deadline import Outcome, call_with_deadline
from cuda_doctor.container.reference import InvalidReference, parse_reference, repo_tags_matching
from cuda_doctor.container.require import is_requirement, parse_bool
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

#: At most this many discovered local images are inspected (requested ones always are).
MAX_DISCOVERED = 50

_TORCH_ENV = ("PYTORCH_VERSION", "TORCH_VERSION", "PYTORCH_BUILD_VERSION")
_CU_SUFFIX = re.compile(r"\+cu(\d{2,3})\b")
_PYTORCH_TAG = re.compile(r"^(?P<torch>\d+\.\d+(?:\.\d+)?)-cuda(?P<cuda>\d+\.\d+)(?:-|$)")


class DockerProbe:
    name = "docker"

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast or bool(ctx.images)  # an explicit --image asks for Docker

    def deadline(self, ctx: ProbeContext) -> float:
        """Every API call's own limit added up, with five steps per image under --run-image."""
        images = len(ctx.images) + MAX_DISCOVERED
        calls = (3 + images) * (ctx.timeout + 2.0) + 2.0
        runs = images * (5 * ctx.smoke_timeout + 2.0) if ctx.run_images else 0.0
        return calls + runs + 5

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        try:
            import docker  # an optional extra
        except ImportError:
            _sdk_missing(facts, ctx)
            return facts
        deadline = ctx.timeout + 2.0
        # version="auto" asks the daemon for its API version, so connecting is the first round trip.
        connect = functools.partial(docker.from_env, environment=dict(ctx.env), timeout=max(1, round(ctx.timeout)))
        outcome = call_with_deadline(connect, deadline, "docker-connect")
        if outcome.value is None:
            _engine_down(facts, *_failure(outcome, ctx), ctx.images)
            return facts
        client = outcome.value
        try:
            _collect_engine(ctx, client, facts, deadline)
        finally:
            closed = call_with_deadline(client.close, 2.0, "docker-close")
            if closed.error is not None:
                facts.set("docker.close_error", f"{type(closed.error).__name__}: {closed.error}")
        return facts


PROBE = DockerProbe()


def _collect_engine(ctx: ProbeContext, client: Any, facts: Facts, deadline: float) -> None:
    info = call_with_deadline(client.info, deadline, "docker-info")
    if info.timed_out or info.error is not None:
        _engine_down(facts, *_failure(info, ctx), ctx.images)
        return
    facts.set("docker.status", "ok")
    facts.set("docker.error", None)
    facts.set("docker.host", _docker_host(ctx.env))
    facts.set("docker.api_version", getattr(getattr(client, "api", None), "api_version", None))
    record_info(facts, info.value if isinstance(info.value, dict) else {})
    # the /dev/char links nvidia-ctk creates keep containers' GPUs across a systemd reload
    facts.set("docker.dev_char_links", os.path.lexists(ctx.file("/dev/char/195:255")))
    refs = collect_images(client, ctx, deadline)
    for i, image in enumerate(refs):
        for key, value in image.items():
            if key.startswith("unknown:"):
                facts.mark_unknown(f"image[{i}].{key.removeprefix('unknown:')}", str(value))
            else:
                facts.set(f"image[{i}].{key}", value)
    facts.set("image.count", len(refs))
    if not ctx.run_images:
        return
    from cuda_doctor.container.run_image import run_nvidia_smi

    for i, image in enumerate(refs):
        if image.get("found") is True:
            facts.merge(run_nvidia_smi(client, str(image["ref"]), i, ctx.smoke_timeout))
        else:
            facts.set(f"image[{i}].run_status", "skipped")
            facts.set(f"image[{i}].run_output", None)
            facts.set(f"image[{i}].run_error", str(image.get("error") or "the image was not found"))


def _docker_host(env: Mapping[str, str]) -> str:
    return env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _sdk_missing(facts: Facts, ctx: ProbeContext) -> None:
    """Said only where an engine socket, a remote DOCKER_HOST or an --image makes it matter."""
    host = _docker_host(ctx.env)
    # tcp://, ssh://: only the SDK could tell whether an engine answers
    if not ctx.images and host.startswith("unix://") and not ctx.file(host.removeprefix("unix://")).exists():
        _engine_down(facts, "unreachable", f"no Docker daemon answers at {host} (no such socket)", ctx.images)
        return
    facts.set("docker.sdk_python", shlex.quote(sys.executable))  # cuda-doctor's own interpreter
    message = f"the docker SDK for Python is not installed where cuda-doctor runs ({sys.executable})"
    _engine_down(facts, "sdk_missing", message, ctx.images)


def _timeout_message(ctx: ProbeContext) -> str:
    return f"the Docker daemon at {_docker_host(ctx.env)} did not answer in {ctx.timeout:g} s"


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and contexts, and exceptions carried in their args."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        item = todo.pop()
        if any(item is s for s in seen):
            continue
        seen.append(item)
        for nxt in (item.__cause__, item.__context__, *item.args):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
            elif isinstance(nxt, tuple):
                todo.extend(a for a in nxt if isinstance(a, BaseException))
    return seen


def _failure(outcome: Outcome[Any], ctx: ProbeContext) -> tuple[str, str]:
    """(docker.status, one-line message) of an SDK call that timed out, failed or returned nothing."""
    host = _docker_host(ctx.env)
    exc = outcome.error
    if outcome.timed_out:
        return "timeout", _timeout_message(ctx)
    if exc is None:
        return "error", f"the docker SDK returned nothing for {host}"
    chain = _chain(exc)
    text = " ".join(str(e) for e in chain)
    names = " ".join(type(e).__name__ for e in chain)
    if any(isinstance(e, PermissionError) for e in chain) or "Permission denied" in text:
        fix = "add your user to the docker group (sudo usermod -aG docker $USER, then log in again) or run as root"
        return "permission_denied", f"permission denied on {host}: {fix}"
    if any(isinstance(e, TimeoutError) for e in chain) or "Timeout" in names or "timed out" in text:
        return "timeout", _timeout_message(ctx)
    unreachable = "ConnectionError" in names or "Connection refused" in text or "No such file" in text
    if unreachable or any(isinstance(e, (FileNotFoundError, ConnectionError)) for e in chain):
        root = next((e for e in reversed(chain) if isinstance(e, OSError) and e.strerror), None)
        why = root.strerror if root is not None else _short(exc)  # "No such file or directory"
        return "unreachable", f"no Docker daemon answers at {host} ({why})"
    if "NotASocket" in names or "Not a socket" in text or "not a socket" in text:
        return "unreachable", f"{host} is not a Docker socket: {_short(exc)}"
    return "error", f"Docker daemon at {host}: {_short(exc)}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def _engine_down(facts: Facts, status: str, message: str, requested: Sequence[str]) -> None:
    facts.set("docker.status", status)
    facts.set("docker.error", message)
    engine = ("version", "runtimes", "nvidia_runtime", "default_runtime", "cdi_devices")
    facts.mark_all_unknown((f"docker.{name}" for name in engine), message)
    # A requested image is still named, so its rule can say why it was not judged.
    for i, ref in enumerate(requested):
        facts.set(f"image[{i}].ref", ref)
        facts.set(f"image[{i}].requested", True)
        try:
            parse_reference(ref)
        except InvalidReference as exc:
            facts.set(f"image[{i}].found", False)
            facts.set(f"image[{i}].error", str(exc))
            continue
        # CD901 says why once; each image only that it was not inspected
        facts.mark_unknown(f"image[{i}].found", "the image was not inspected: the Docker engine could not be asked")
    if requested:
        facts.set("image.count", len(requested))


def record_info(facts: Facts, info: Mapping[str, Any]) -> None:
    """Facts from ``docker info`` (GET /info)."""
    facts.set("docker.version", info.get("ServerVersion"))
    runtimes = info.get("Runtimes")
    names = sorted(runtimes) if isinstance(runtimes, dict) else []
    facts.set("docker.runtimes", names)
    facts.set("docker.nvidia_runtime", any(n.startswith("nvidia") for n in names))
    facts.set("docker.default_runtime", info.get("DefaultRuntime"))
    facts.set("docker.cgroup_driver", info.get("CgroupDriver"))
    # CDI: CDISpecDirs (API 1.45+) and DiscoveredDevices (API 1.50+) where the engine has them.
    spec_dirs = info.get("CDISpecDirs")
    facts.set("docker.cdi_spec_dirs", list(spec_dirs) if isinstance(spec_dirs, list) else None)
    devices = info.get("DiscoveredDevices")
    ids = [
        str(d.get("ID"))
        for d in (devices if isinstance(devices, list) else [])
        if isinstance(d, dict) and str(d.get("Source", "cdi")).lower() == "cdi" and d.get("ID")
    ]
    facts.set("docker.cdi_devices", ids)
    facts.set("docker.cdi_gpu", any(d.startswith("nvidia.com/gpu") for d in ids))


def collect_images(client: Any, ctx: ProbeContext, deadline: float) -> list[dict[str, Any]]:
    """One dict per image: the requested references first, then interesting local images."""
    out = [{**inspect_reference(client, ref, deadline), "requested": True} for ref in ctx.images]
    seen_ids = {str(item["id"]) for item in out if item.get("id")}
    listed = call_with_deadline(client.api.images, deadline, "docker-images")
    if listed.timed_out or listed.error is not None:
        reason = _timeout_message(ctx) if listed.timed_out else _short(listed.error)  # type: ignore[arg-type]
        out.append({"ref": None, "requested": False, "found": False, "error": f"listing images failed: {reason}"})
        return out
    for summary in listed.value if isinstance(listed.value, list) else []:
        tags = repo_tags_matching(summary.get("RepoTags"))
        image_id = str(summary.get("Id", ""))
        if not tags or image_id in seen_ids:
            continue
        if len(out) >= len(ctx.images) + MAX_DISCOVERED:
            break
        seen_ids.add(image_id)
        out.append({**inspect_reference(client, tags[0], deadline), "requested": False})
    return out


def inspect_reference(client: Any, ref: str, deadline: float) -> dict[str, Any]:
    try:
        parse_reference(ref)
    except InvalidReference as exc:
        return {"ref": ref, "found": False, "error": str(exc)}
    outcome = call_with_deadline(lambda: client.api.inspect_image(ref), deadline, "docker-inspect")
    if outcome.timed_out:
        return {"ref": ref, "unknown:found": f"inspecting {ref} did not finish in {deadline:g} s"}
    if outcome.error is None:
        data = outcome.value if isinstance(outcome.value, dict) else {}
        return {"ref": ref, **image_facts(data, ref), "found": True, "error": None}
    if type(outcome.error).__name__ in ("ImageNotFound", "NotFound"):
        error = f"no such image on this host: {ref} (pull it first: docker pull {ref})"
        return {"ref": ref, "found": False, "error": error}
    return {"ref": ref, "unknown:found": f"inspecting {ref} failed: {_short(outcome.error)}"}


def image_facts(data: Mapping[str, Any], ref: str | None = None) -> dict[str, Any]:
    """Facts read from ``docker image inspect`` output."""
    config = data.get("Config") or {}
    pairs = (str(entry).partition("=") for entry in config.get("Env") or [])
    env = {name: value for name, sep, value in pairs if sep}
    labels = config.get("Labels") or {}
    names = [*(data.get("RepoTags") or []), *([ref] if ref else [])]
    torch_version, variant = torch_variant(env, labels, names)
    return {
        "id": data.get("Id"),
        "tags": list(data.get("RepoTags") or []),
        "cuda_version": env.get("CUDA_VERSION"),
        "nvidia_require_cuda": env.get("NVIDIA_REQUIRE_CUDA"),
        "require_env": {k: v for k, v in sorted(env.items()) if is_requirement(k)},
        "nvidia_disable_require": parse_bool(env.get("NVIDIA_DISABLE_REQUIRE")),
        "nvidia_visible_devices": env.get("NVIDIA_VISIBLE_DEVICES"),
        "torch_version": torch_version,
        "torch_variant": variant,
        "entrypoint": config.get("Entrypoint"),
        "cmd": config.get("Cmd"),
        "architecture": data.get("Architecture"),
        "size_bytes": data.get("Size"),
    }


def torch_variant(env: Mapping[str, str], labels: Mapping[str, Any], names: list[str]) -> tuple[str | None, str | None]:
    """(torch version, its CUDA build) from the env, labels, or a ``pytorch/pytorch`` tag."""
    version = next((env[name] for name in _TORCH_ENV if env.get(name)), None)
    candidates = [version or ""] + [str(v) for k, v in labels.items() if "torch" in str(k).lower()]
    for text in candidates:
        match = _CU_SUFFIX.search(text)
        if match:
            digits = match.group(1)
            return version, f"{int(digits[:-1])}.{int(digits[-1])}"
        if text.endswith("+cpu"):
            return version, "cpu"
    for name in names:
        try:
            ref = parse_reference(name)
        except InvalidReference:
            continue
        if ref.repository != "docker.io/pytorch/pytorch" or ref.tag is None:
            continue
        match = _PYTORCH_TAG.match(ref.tag)
        if match:
            return version or match.group("torch"), match.group("cuda")
    return version, None

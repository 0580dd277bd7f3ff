"""``--run-image``: ``docker run --rm --gpus all IMAGE nvidia-smi`` through the SDK, in steps
(create, start, wait, logs, remove), each time-bounded."""

from __future__ import annotations

from typing import Any

from cuda_doctor.base.deadline import call_with_deadline
from cuda_doctor.core.facts import Facts

NO_DEVICE_DRIVER = "could not select device driver"  # Docker, with no NVIDIA Container Toolkit set up
OUTPUT_LIMIT = 4000


def run_nvidia_smi(
    client: Any, ref: str, index: int, timeout: float, command: tuple[str, ...] = ("nvidia-smi",)
) -> Facts:
    """Run ``command`` in ``ref`` with all GPUs and record the outcome as ``image[index].run_*``."""
    import docker

    facts = Facts()
    prefix = f"image[{index}]"
    what = f"{' '.join(command)} in {ref}"

    def record(status: str, output: str | None, error: str | None) -> Facts:
        facts.set(f"{prefix}.run_status", status)
        facts.set(f"{prefix}.run_output", output[-OUTPUT_LIMIT:] if output else output)
        facts.set(f"{prefix}.run_error", error)
        return facts

    gpus = docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
    created = call_with_deadline(
        lambda: client.containers.create(ref, command=list(command), device_requests=[gpus]), timeout, "docker-create"
    )
    if created.timed_out:
        return record("timeout", None, f"creating a container from {ref} took more than {timeout:g} s")
    if created.error is not None:
        return record(*_api_failure(created.error))
    container: Any = created.value
    try:
        started = call_with_deadline(container.start, timeout, "docker-start")
        if started.timed_out:
            return record("timeout", None, f"starting {ref} took more than {timeout:g} s")
        if started.error is not None:
            return record(*_api_failure(started.error))
        waited = call_with_deadline(lambda: container.wait(timeout=timeout), timeout + 2, "docker-wait")
        logs = call_with_deadline(lambda: container.logs(stdout=True, stderr=True), timeout, "docker-logs")
        output = logs.value.decode("utf-8", "replace") if isinstance(logs.value, bytes) else None
        if waited.timed_out or waited.error is not None:
            detail = _short(waited.error) if waited.error is not None else ""
            return record("timeout", output, f"{what} did not finish in {timeout:g} s {detail}".strip())
        code = waited.value.get("StatusCode") if isinstance(waited.value, dict) else None
        if code == 0:
            return record("ok", output, None)
        last = (output or "").strip().splitlines()
        tail = f": {last[-1]}" if last else ""
        return record("failed", output, f"{what} exited with status {code}{tail}")
    finally:
        removed = call_with_deadline(lambda: container.remove(force=True), timeout, "docker-rm")
        if removed.timed_out or removed.error is not None:
            why = "timed out" if removed.timed_out else _short(removed.error)  # type: ignore[arg-type]
            facts.set(f"{prefix}.run_cleanup_error", why)


def _api_failure(exc: BaseException) -> tuple[str, str | None, str]:
    text = _explanation(exc)
    if NO_DEVICE_DRIVER in text:
        return "no_device_driver", None, text
    if type(exc).__name__ in ("ImageNotFound", "NotFound"):
        return "error", None, f"no such image: {text}"
    return "error", None, text


def _explanation(exc: BaseException) -> str:
    explanation = getattr(exc, "explanation", None)
    text = str(explanation) if explanation else str(exc)
    return text.strip() or type(exc).__name__


def _short(exc: BaseException) -> str:
    return f"({type(exc).__name__}: {_explanation(exc)})"

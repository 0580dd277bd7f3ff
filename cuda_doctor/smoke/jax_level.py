"""JAX smoke step: a jitted bf16 matmul on every GPU JAX has, checked and timed.

Run by the *target* interpreter inside the JAX child (``cuda_doctor/jax/_child.py`` runs it
after the backend is up, as ``python -c <source> CONFIG`` would), composed with the child-side
module it names: what runs there imports nothing from cuda_doctor.  Per GPU: a 4096³ bf16 matmul
compiled by ``jax.jit``, timed over about 40 ms of work, and its first rows checked against the
float32 product of the same bf16 inputs on the host.  The child runs with
``XLA_PYTHON_CLIENT_PREALLOCATE=false``: it takes only what it uses.

Output, one JSON object per line on stdout (``cuda_doctor.children``): ``{"started": true}``,
``{"step": …}`` before each step, ``{"device": {…}}`` after each GPU, then ``{"result": {…}}``.
CONFIG is a JSON object: ``{"size": 4096}``; ``"platform": "cpu"`` runs the same step on JAX's
CPU devices (the tests' way to run it on a machine without a GPU).
"""

from __future__ import annotations

import time
from typing import Any

from cuda_doctor.childside.script import CURRENT_STEP, emit, error_text, script_main, step

REFERENCE_ROWS = 256
#: Relative error (Frobenius norm) allowed against the float32 product of the same bf16 inputs:
#: the product is rounded to bf16 (8 mantissa bits), as the framework-level bf16 matmul is.
TOLERANCE = 5e-2
WORK_SECONDS = 0.04


def relative_error(got: Any, reference: Any, np: Any) -> float | None:
    """Frobenius-norm relative error; None when the result holds a NaN or an infinity."""
    if not bool(np.isfinite(got).all()):
        return None
    return float(np.linalg.norm(got - reference) / np.linalg.norm(reference))


def matmul(jax: Any, device: Any, size: int, label: str) -> dict[str, Any]:
    import numpy as np

    jnp = jax.numpy
    out: dict[str, Any] = {"index": int(device.id), "kind": str(device.device_kind), "error": None}
    step(f"{label}: compile")
    rng = np.random.default_rng(0)
    host_a = rng.standard_normal((size, size), dtype=np.float32).astype(jnp.bfloat16)
    host_b = rng.standard_normal((size, size), dtype=np.float32).astype(jnp.bfloat16)
    a, b = jax.device_put(host_a, device), jax.device_put(host_b, device)
    product = jax.jit(jnp.matmul)
    started = time.perf_counter()
    c = product(a, b).block_until_ready()  # compiles, then runs once
    out["compile_seconds"] = round(time.perf_counter() - started, 3)
    step(label)
    started = time.perf_counter()
    c = product(a, b).block_until_ready()
    once = max(time.perf_counter() - started, 1e-6)
    reps = int(min(50, max(3, WORK_SECONDS / once)))
    started = time.perf_counter()
    for _ in range(reps):
        c = product(a, b)
    c.block_until_ready()
    seconds = (time.perf_counter() - started) / reps
    out["bf16_tflops"] = round(2.0 * size**3 / seconds / 1e12, 2)
    step(f"{label}: check on the host")
    rows = min(REFERENCE_ROWS, size)
    reference = host_a[:rows].astype(np.float32) @ host_b.astype(np.float32)
    error = relative_error(np.asarray(c[:rows], dtype=np.float32), reference, np)
    out["bf16_rel_err"] = error
    out["bf16_tolerance"] = TOLERANCE
    out["bf16_ok"] = error is not None and error <= TOLERANCE
    return out


def run(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "failed", "error": None, "devices": []}
    step("jax devices")
    import jax

    result["jax_version"] = str(jax.__version__)
    result["backend"] = str(jax.default_backend())
    wanted = str(config.get("platform", "gpu"))
    devices = [d for d in jax.devices() if d.platform == wanted or (wanted == "gpu" and d.platform == "cuda")]
    result["device_count"] = len(devices)
    if not devices:
        result.update(
            status="skipped", error=f"JAX has no {wanted.upper()} device (its backend is {result['backend']})"
        )
        return result
    size = int(config.get("size", 4096))
    for device in devices:
        label = f"jax matmul bf16 on {wanted.upper()} {device.id}"
        try:
            record = matmul(jax, device, size, label)
        except Exception as exc:  # the error text *is* the finding
            record = {"index": int(device.id), "kind": str(device.device_kind), "error": error_text(exc)}
            record["step"] = CURRENT_STEP[0]
        emit({"device": record})  # kept by the parent even if a later GPU hangs
        result["devices"].append(record)
    failed = [d for d in result["devices"] if d["error"] or not d.get("bf16_ok")]
    if not failed:
        result["status"] = "ok"
        return result
    first = failed[0]
    if first["error"]:
        result["error"] = f"{first['step']}: {first['error']}"
        result["error_step"] = first["step"]
    else:
        error = first["bf16_rel_err"]
        by = "holds a NaN or an infinity" if error is None else f"differs from the float32 product by {error:.3g}"
        result["error"] = f"{wanted.upper()} {first['index']}: the bf16 matmul {by} (tolerance {TOLERANCE})"
    return result


if __name__ == "__main__":
    script_main(run)

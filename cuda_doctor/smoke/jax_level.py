"""JAX smoke step, run in the JAX child: a jitted bf16 matmul on every GPU JAX has, checked and
timed.  With ``"prepare": true`` in CONFIG it compiles, prints ``{"prepared": {…}}`` and measures
once ``{"measure": true}`` comes on stdin.  ``"platform": "cpu"`` runs it on JAX's CPU devices."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from cuda_doctor.base.childside.script import CURRENT_STEP, emit, error_text, script_main, step

REFERENCE_ROWS = 256
#: Relative error allowed against the float32 product of the same inputs: the product is rounded to bf16.
TOLERANCE = 5e-2
WORK_SECONDS = 0.04
SIGN_AND_MANTISSA = 0x807F  # bf16: 1 sign bit, 8 exponent bits, 7 mantissa bits
EXPONENT_ONE = 0x3F80  # the exponent of 1.0
MAX_REPS = 2048


def random_bf16(np: Any, shape: tuple[int, ...]) -> Any:
    """bf16 bits (uint16) of random sign and mantissa, magnitude in [1, 2): drawn on the host, nothing to compile."""
    bits = np.frombuffer(np.random.default_rng(0).bytes(2 * int(np.prod(shape))), dtype=np.uint16)
    return ((bits & SIGN_AND_MANTISSA) | EXPONENT_ONE).reshape(shape)


class Matmul:
    """One device's bf16 matmul: compiled first, measured and checked later."""

    def __init__(self, jax: Any, device: Any, size: int, label: str) -> None:
        self.jax, self.device, self.size, self.label = jax, device, size, label
        self.out: dict[str, Any] = {"index": int(device.id), "kind": str(device.device_kind), "error": None}
        # once compiled: the jitted matmul, its inputs on the device, the host's product of the first rows
        self.product: Any = None
        self.inputs: Any = None
        self.reference: Any = None

    def attempt(self, stage: Callable[[Matmul], None]) -> None:
        """Run one stage (``Matmul.compile``, ``Matmul.measure``) unless an earlier one failed."""
        if self.out["error"] is not None:
            return  # an earlier stage failed: its error is the finding
        try:
            stage(self)
        except Exception as exc:  # the error text *is* the finding
            self.out = {"index": self.out["index"], "kind": self.out["kind"], "error": error_text(exc)}
            self.out["step"] = CURRENT_STEP[0]

    def compile(self) -> None:
        jax, size = self.jax, self.size
        import numpy as np

        rows = min(REFERENCE_ROWS, size)
        step(f"{self.label}: inputs")
        a, b = random_bf16(np, (2, size, size)).view(jax.numpy.bfloat16)
        self.inputs = (jax.device_put(a, self.device), jax.device_put(b, self.device))
        step(f"{self.label}: compile")
        self.product = jax.jit(jax.numpy.matmul)
        started = time.perf_counter()
        self.product(*self.inputs).block_until_ready()  # compiles, then runs once
        self.out["compile_seconds"] = round(time.perf_counter() - started, 3)
        step(f"{self.label}: reference on the host")
        # the float32 product of the same bf16 values; the inputs do not change, so one serves
        self.reference = a[:rows].astype(np.float32) @ b.astype(np.float32)

    def measure(self) -> None:
        import numpy as np

        step(self.label)
        c = self.product(*self.inputs).block_until_ready()  # a warm-up
        # batches four times longer each time until one lasts WORK_SECONDS, long enough to hide
        # JAX's dispatch and the final wait
        reps = 8
        while True:
            started = time.perf_counter()
            for _ in range(reps):
                c = self.product(*self.inputs)
            c.block_until_ready()
            seconds = (time.perf_counter() - started) / reps
            if seconds * reps >= WORK_SECONDS or reps >= MAX_REPS:
                break
            reps *= 4
        self.out["bf16_tflops"] = round(2.0 * self.size**3 / seconds / 1e12, 2)
        step(f"{self.label}: check on the host")
        # cut on the host: slicing on the device would compile one more kernel
        got = np.asarray(c)[: len(self.reference)].astype(np.float32)
        finite = bool(np.isfinite(got).all())  # the Frobenius-norm relative error needs finite figures
        error = float(np.linalg.norm(got - self.reference) / np.linalg.norm(self.reference)) if finite else None
        self.out["bf16_rel_err"] = error
        self.out["bf16_tolerance"] = TOLERANCE
        self.out["bf16_ok"] = error is not None and error <= TOLERANCE


def told_to_measure() -> bool:
    """The parent's word, one line on stdin: ``{"measure": true}``; anything else is the end."""
    try:
        order = json.loads(sys.stdin.readline())
    except ValueError:  # stdin closed: no smoke run follows
        return False
    return isinstance(order, dict) and order.get("measure") is True


def run(config: dict[str, Any]) -> dict[str, Any] | None:
    result: dict[str, Any] = {"status": "failed", "error": None, "devices": []}
    step("jax devices")
    import jax

    result["jax_version"] = str(jax.__version__)
    result["backend"] = str(jax.default_backend())
    wanted = str(config.get("platform", "gpu"))
    devices = [d for d in jax.devices() if d.platform == wanted or (wanted == "gpu" and d.platform == "cuda")]
    result["device_count"] = len(devices)
    if not devices:
        result["status"] = "skipped"
        result["error"] = f"JAX has no {wanted.upper()} device (its backend is {result['backend']})"
        return result
    size = int(config.get("size", 4096))
    matmuls = [Matmul(jax, device, size, f"jax matmul bf16 on {wanted.upper()} {device.id}") for device in devices]
    stages = [Matmul.compile, Matmul.measure]
    if config.get("prepare"):  # every device compiled now, measured when the parent says so
        started = time.perf_counter()
        for matmul in matmuls:
            matmul.attempt(Matmul.compile)
        emit({"prepared": {"seconds": round(time.perf_counter() - started, 3)}})
        if not told_to_measure():
            return None
        stages = [Matmul.measure]
    for matmul in matmuls:
        for stage in stages:
            matmul.attempt(stage)
        emit({"device": matmul.out})  # kept by the parent even if a later GPU hangs
        result["devices"].append(matmul.out)
    return judged(result, wanted)


def judged(result: dict[str, Any], wanted: str) -> dict[str, Any]:
    """The result's status and error from its devices' records."""
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

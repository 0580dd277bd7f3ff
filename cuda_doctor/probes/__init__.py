"""Probes gather facts, one module per source.  ``PROBES`` is the one explicit registry.

Each module exposes ``PROBE``, an object satisfying ``cuda_doctor.probes.base.Probe``.
Phase 1 probes only read state and run concurrently; phase 2 probes put work on the GPU,
so they run after phase 1 has read the idle GPU (otherwise our own smoke kernels would show
up as "another process holding the GPU").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_doctor.facts import Facts

PHASE_1: dict[str, str] = {
    "gpu": "cuda_doctor.probes.gpu",
    "environment": "cuda_doctor.probes.environment",
    "toolkit": "cuda_doctor.probes.toolkit",
    "framework": "cuda_doctor.probes.framework",
    "jax": "cuda_doctor.jax.probe",
    "docker": "cuda_doctor.probes.docker",
    "kernel": "cuda_doctor.probes.kernel_module",
}
PHASE_2: dict[str, str] = {
    # JAX's backend and its smoke step, never beside the torch smoke run: first, so that the JAX
    # child's end (its contexts torn down) overlaps the torch run's start
    "jax_gpu": "cuda_doctor.jax.gpu_probe",
    "smoke": "cuda_doctor.smoke.probe",
    "nccl": "cuda_doctor.nccl.probe",
}
PROBES: dict[str, str] = {**PHASE_1, **PHASE_2}

#: The facts each probe provides, so that a rule needing facts of a probe that did not run
#: is reported as skipped ("not checked: --fast"), not as a fact that could not be gathered.
PROVIDES: dict[str, tuple[str, ...]] = {
    "framework": ("torch.", "tensorflow.", "framework.", "dist[", "companion[", "cudalib[", "fatbin."),
    "jax": ("jax.",),
    "toolkit": ("toolkit.",),
    "docker": ("docker.", "image[", "image."),
    "smoke": ("smoke",),
    "nccl": ("nccl.", "nvlink["),
    "kernel": ("kernel.",),
}

#: The probes `--fast` runs (NVML/nvidia-smi, environment and container only).  Listed here so
#: that a fast check does not even import the others.
FAST: frozenset[str] = frozenset({"gpu", "environment"})


def runs_fast(name: str, images: tuple[str, ...]) -> bool:
    """Whether probe ``name`` runs under ``--fast``: the fast ones, and Docker when images are
    named (``--image`` asks for it, as ``DockerProbe.applies`` says)."""
    return name in FAST or (name == "docker" and bool(images))


def not_checked(why: str) -> str:
    """A skipped probe's reason as a result's message: "not checked (--fast)", "not checked at
    container start (exec runs the fast check)", "not checked: not applicable here"."""
    if why.startswith("--"):
        return f"not checked ({why})"
    return f"not checked {why}" if why.startswith("at ") else f"not checked: {why}"


def skipped_probes(facts: Facts) -> dict[str, str]:
    """The probes that did not run → why (their ``probe.<name>.reason``)."""
    return {
        name: str(facts.get(f"probe.{name}.reason") or "not run")
        for name in PROBES
        if facts.get(f"probe.{name}.status") == "skipped"
    }

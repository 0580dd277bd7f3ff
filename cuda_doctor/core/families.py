"""The one table of what cuda-doctor knows how to gather and judge.

Adding a fact family touches this file once: the probe that gathers it (``PROBES``), what it
is about in words and how a per-item result names its subject (``FAMILIES``), and the derivers
that compute ``derived.*`` facts from it (``DERIVERS``).  Probes and derivers are named by
module so that a command imports only what it runs (``check --fast`` never imports the
framework probe); ``load`` imports them and fails loudly on a misspelt name, and a test
imports every entry.

Phase 1 probes only read state and run concurrently; phase 2 probes put work on the GPU, one
at a time, after phase 1 has read the idle GPU (otherwise the smoke kernels would show up as
"another process holding the GPU").
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ProbeEntry:
    module: str  # its module defines ``PROBE``
    phase: int  # 1: reads state, concurrently; 2: puts work on the GPU, one at a time
    fast: bool = False  # runs under --fast (NVML/nvidia-smi, environment and container only)


PROBES: dict[str, ProbeEntry] = {
    "gpu": ProbeEntry("cuda_doctor.gpu.probe", 1, fast=True),
    "environment": ProbeEntry("cuda_doctor.host.environment", 1, fast=True),
    "toolkit": ProbeEntry("cuda_doctor.host.toolkit", 1),
    "framework": ProbeEntry("cuda_doctor.framework.probe", 1),
    "jax": ProbeEntry("cuda_doctor.jax.probe", 1),
    "compile": ProbeEntry("cuda_doctor.framework.compile.probe", 1),
    "docker": ProbeEntry("cuda_doctor.container.docker", 1),
    "kernel": ProbeEntry("cuda_doctor.host.kernel_module", 1),
    "kernel_log": ProbeEntry("cuda_doctor.host.kernel_log", 1, fast=True),
    "network": ProbeEntry("cuda_doctor.network.probe", 1, fast=True),  # sysfs reads: milliseconds
    # JAX's backend and its smoke step, never beside the torch smoke run: first, so that the JAX
    # child's end (its contexts torn down) overlaps the torch run's start
    "jax_gpu": ProbeEntry("cuda_doctor.jax.gpu_probe", 2),
    "smoke": ProbeEntry("cuda_doctor.smoke.probe", 2),
    "nccl": ProbeEntry("cuda_doctor.nccl.probe", 2),
}
#: Phase-1 probes that start a child of the target interpreter (an import of torch or jax that
#: takes seconds): loaded and started first, before the other probes' modules are imported.
STARTED_FIRST = ("framework", "jax", "compile")


@dataclass(frozen=True, slots=True)
class Family:
    probe: str | None  # the probe that gathers it; None: no probe (the pipeline's own facts)
    about: str | None = None  # in words, for "nothing was gathered about …"
    subject: str | None = None  # how a per-item result names its item: smoke[1] is "GPU 1"
    subject_names: tuple[str, ...] = ()  # facts that name an item better than its index


#: Fact families by the first part of their names (``gpu`` for ``gpu[0].name``).
FAMILIES: dict[str, Family] = {
    "driver": Family("gpu", "the NVIDIA driver"),
    "gpu": Family("gpu", "the GPUs", "GPU"),
    "container": Family("environment", "the container"),
    "system": Family("environment", "this system"),
    "shm": Family("environment", "the shared memory"),
    "env": Family("environment", "the environment variables"),
    "cvd": Family("environment", "CUDA_VISIBLE_DEVICES"),
    "toolkit": Family("toolkit", "the CUDA toolkit"),
    "nvcc": Family("toolkit", "the CUDA toolkit"),
    "torch": Family("framework", "torch"),
    "tensorflow": Family("framework", "TensorFlow"),
    "framework": Family("framework", "the framework"),
    "dist": Family("framework", None, "CUDA distribution", ("name",)),
    "companion": Family("framework", None, "companion package", ("name",)),
    "cudalib": Family("framework", None, "loaded CUDA library", ("file",)),
    "fatbin": Family("framework"),
    "jax": Family("jax"),
    "compile": Family("compile", "the compile toolchain"),
    "docker": Family("docker", "Docker"),
    "image": Family("docker", "the Docker images", "image", ("ref", "requested")),
    "kernel": Family("kernel", "the NVIDIA kernel module"),
    "pci": Family(None, "the GPUs on the PCI bus"),
    "kernel_log": Family("kernel_log", "the kernel log"),
    "xid": Family(None, "the kernel log's Xid events"),
    "net": Family("network", "the network"),
    "smoke": Family("smoke", "the GPU smoke run", "GPU"),
    "nccl": Family("nccl", "NCCL and the links between the GPUs"),
    "nvlink": Family("nccl", "NVLink", "GPU"),
    "probe": Family(None, "the probes"),
    "nodes": Family(None, "the nodes of a multi-node job (`cuda-doctor nodes` checks them)"),
}

#: Every deriver in the order it runs, with the fact-name prefixes it reads: it runs (and is
#: imported) only when such a fact exists, known or not; () runs always.
DERIVERS: list[tuple[str, tuple[str, ...]]] = [
    ("cuda_doctor.framework.derive:derive_driver_support", ()),
    ("cuda_doctor.framework.derive:derive_wheel_suggestion", ()),
    ("cuda_doctor.framework.derive:derive_arch", ()),
    ("cuda_doctor.gpu.visible_devices:derive", ()),
    ("cuda_doctor.gpu.memory_health:derive", ("gpu[",)),
    ("cuda_doctor.gpu.fabric_health:derive", ()),
    ("cuda_doctor.gpu.nvlink_health:derive", ()),
    ("cuda_doctor.host.derive:derive", ()),
    ("cuda_doctor.host.xid:derive", ("kernel_log.",)),
    ("cuda_doctor.host.xid:derive_live", ("smoke.xid_events",)),
    ("cuda_doctor.host.devices:derive", ("kernel.",)),
    ("cuda_doctor.network.derive:derive", ("net.",)),
    ("cuda_doctor.container.derive:derive", ("container.cuda_version", "container.nvidia_require", "image[")),
    ("cuda_doctor.smoke.expected:derive", ("smoke",)),
    ("cuda_doctor.jax.derive:derive", ("jax.",)),
    ("cuda_doctor.nccl.derive:derive", ()),  # also says why the all-reduce did not run
    ("cuda_doctor.framework.libraries.pins:derive", ("torch.installed", "dist[")),
    (
        "cuda_doctor.framework.libraries.loaded:derive",
        ("framework.cuda_library_count", "cudalib["),
    ),  # before the next two
    ("cuda_doctor.framework.libraries.import_error:derive", ("torch.import_error",)),
    (
        "cuda_doctor.framework.libraries.cuda_init:derive",
        ("torch.installed", "smoke.driver_level.", "kernel.", "cudalib["),
    ),
    ("cuda_doctor.framework.libraries.companions:derive", ("companion[",)),
    ("cuda_doctor.framework.fatbin.derive:derive", ("fatbin.",)),
    ("cuda_doctor.framework.compile.derive:derive", ("compile.",)),
]


def load(spec: str) -> Any:
    """The object a registry names: ``"package.module:attribute"``, or a module's ``PROBE``."""
    module_name, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module_name), attribute or "PROBE")


def family(name: str) -> str:
    """``gpu[0].name`` → ``gpu``; ``derived.driver_cuda_support`` → ``driver_cuda_support``."""
    return re.split(r"[.\[]", name.removeprefix("derived."), maxsplit=1)[0]


def about(name: str) -> str:
    """``driver.status`` → "the NVIDIA driver", ``derived.gpu[0].sm`` → "the GPUs"."""
    first = family(name)
    # derived.driver_cuda_support is about the driver, derived.shm_mib about shared memory
    for candidate in (first, first.split("_")[0]):
        words = FAMILIES[candidate].about if candidate in FAMILIES else None
        if words:
            return words
    return "what this check needs"


def provider(name: str) -> str | None:
    """The probe that gathers fact ``name`` (None for derived facts and the pipeline's own)."""
    if name.startswith("derived."):
        return None
    found = FAMILIES.get(family(name))
    return None if found is None else found.probe


def runs_fast(name: str, images: tuple[str, ...]) -> bool:
    """Whether probe ``name`` runs under ``--fast``: the fast ones, and Docker when images are
    named (``--image`` asks for it, as ``DockerProbe.applies`` says)."""
    return PROBES[name].fast or (name == "docker" and bool(images))


def not_checked(why: str) -> str:
    """A skipped probe's reason as a result's message: "not checked (--fast)", "not checked at
    container start (exec runs the fast check)", "not checked: not applicable here"."""
    if why.startswith("--"):
        return f"not checked ({why})"
    return f"not checked {why}" if why.startswith("at ") else f"not checked: {why}"

"""A real Docker engine for the container tests, and images made without a registry.

``docker_engine`` uses ``DOCKER_HOST`` when it answers; otherwise, as root, it starts a private
engine with ``.ci/start-dockerd.sh``; otherwise the test is skipped with the reason.  Images are
``docker import``-ed from a rootfs tarball built here (with a static busybox when the machine has
one, so containers have a shell), tagged like real CUDA images and given their environment.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
START_SCRIPT = REPO / ".ci" / "start-dockerd.sh"

CUDA_IMAGE = "nvidia/cuda:12.2.2-base-ubuntu22.04"
CUDA_REQUIRE = "cuda>=12.2 brand=tesla,driver>=470,driver<471"
TORCH_IMAGE = "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"
TRAIN_IMAGE = "cuda-doctor-test/train:cu121-on-12.4"
LEGACY_IMAGE = "cuda-doctor-test/legacy:11.8"

IMAGES: dict[str, list[str]] = {
    CUDA_IMAGE: ["ENV CUDA_VERSION=12.2.2", f'ENV NVIDIA_REQUIRE_CUDA="{CUDA_REQUIRE}"'],
    TORCH_IMAGE: ["ENV PYTORCH_VERSION=2.3.0"],
    TRAIN_IMAGE: ["ENV CUDA_VERSION=12.4.1", "ENV PYTORCH_VERSION=2.3.0+cu121"],
    LEGACY_IMAGE: ["ENV CUDA_VERSION=11.8.0"],
}


@dataclass(frozen=True)
class Engine:
    host: str
    client: Any
    has_shell: bool

    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.host, "PATH": os.environ.get("PATH", os.defpath)}


def _answers(host: str) -> str | None:
    """None when the engine at ``host`` answers a ping, else why not."""
    try:
        import docker
    except ImportError as exc:
        return f"the docker SDK is not installed ({exc})"
    try:
        client = docker.DockerClient(base_url=host, timeout=5)
        client.ping()
        client.close()
    except Exception as exc:  # any failure means "not usable", and the reason is reported
        return f"{type(exc).__name__}: {exc}"
    return None


def _find_engine() -> tuple[str | None, str]:
    host = os.environ.get("DOCKER_HOST")
    if host:
        problem = _answers(host)
        if problem is None:
            return host, ""
        reason = f"DOCKER_HOST={host} does not answer ({problem})"
    else:
        reason = "DOCKER_HOST is not set"
    if os.geteuid() != 0:
        return None, f"{reason}, and starting dockerd needs root"
    if shutil.which("bash") is None:
        return None, f"{reason}, and bash is missing to run {START_SCRIPT.name}"
    proc = subprocess.run(["bash", str(START_SCRIPT)], capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{reason}, and {START_SCRIPT.name} failed: {tail}"
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("export DOCKER_HOST=")), "")
    started = line.partition("=")[2]
    problem = _answers(started) if started else "it printed no DOCKER_HOST"
    if problem is not None:
        return None, f"{reason}, and the engine it started does not answer ({problem})"
    return started, ""


def rootfs_tar() -> tuple[bytes, bool]:
    """A tiny root file system; with a static busybox as /bin/sh when one is on this machine."""
    buffer = io.BytesIO()
    busybox = shutil.which("busybox")
    static = busybox is not None and _is_static(Path(busybox))
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("bin", "etc", "tmp"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        release = b"cuda-doctor test image\n"
        info = tarfile.TarInfo("etc/issue")
        info.size = len(release)
        tar.addfile(info, io.BytesIO(release))
        if static and busybox is not None:
            tar.add(busybox, arcname="bin/busybox")
            for applet in ("sh", "echo", "cat", "true", "sleep"):
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type = tarfile.SYMTYPE
                link.linkname = "busybox"
                tar.addfile(link)
    return buffer.getvalue(), bool(static)


def _is_static(path: Path) -> bool:
    # A dynamic ELF names its loader (PT_INTERP) near the start of the file.
    head = path.read_bytes()[:8192]
    return head.startswith(b"\x7fELF") and b"ld-linux" not in head and b"ld-musl" not in head


@pytest.fixture(scope="session")
def docker_engine() -> Engine:
    host, reason = _find_engine()
    if host is None:
        pytest.skip(f"no Docker engine: {reason}")
    import docker

    client = docker.DockerClient(base_url=host, timeout=60)
    _, has_shell = rootfs_tar()
    return Engine(host, client, has_shell)


@pytest.fixture(scope="session")
def test_images(docker_engine: Engine) -> Iterator[dict[str, str]]:
    """The images above, imported into the engine; their ids by reference.  Removed afterwards."""
    data, _ = rootfs_tar()
    ids: dict[str, str] = {}
    for ref, changes in IMAGES.items():
        repository, _, tag = ref.rpartition(":")
        docker_engine.client.api.import_image_from_data(data, repository=repository, tag=tag, changes=changes)
        ids[ref] = docker_engine.client.api.inspect_image(ref)["Id"]
    yield ids
    for ref in IMAGES:
        try:
            docker_engine.client.api.remove_image(ref, force=True)
        except Exception as exc:  # leftovers are harmless, but say so
            print(f"could not remove {ref}: {exc}")

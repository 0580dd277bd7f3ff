"""A real Docker engine for the container tests, and images made without a registry.

``docker_engine`` uses ``DOCKER_HOST`` when it answers, else the engine that ``.ci/run`` starts
(``.ci/start-dockerd.sh``'s socket) when that one answers; both are left running.  Otherwise,
as root, it starts a private engine (own folder) with ``.ci/start-dockerd.sh`` and stops it
when the test session ends; otherwise the test is skipped with the reason.  Images are
``docker import``-ed from a rootfs tarball built here (with a static busybox when the machine has
one, so containers have a shell), tagged like real CUDA images and given their environment.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import warnings
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


def _find_engine() -> tuple[str | None, str, Path | None]:
    """(engine, why there is none, the folder of a private engine started here)."""
    host = os.environ.get("DOCKER_HOST")
    if host:
        problem = _answers(host)
        if problem is None:
            return host, "", None
        reason = f"DOCKER_HOST={host} does not answer ({problem})"
    else:
        reason = "DOCKER_HOST is not set"
    shared = f"unix://{os.environ.get('CUDA_DOCTOR_CI_DIR', '/tmp/cuda-doctor-ci')}/docker.sock"
    if shared != host and _answers(shared) is None:
        return shared, "", None
    if os.geteuid() != 0:
        return None, f"{reason}, and starting dockerd needs root", None
    if shutil.which("bash") is None:
        return None, f"{reason}, and bash is missing to run {START_SCRIPT.name}", None
    folder = Path(tempfile.mkdtemp(prefix="cd-dockerd-"))
    env = {**os.environ, "CUDA_DOCTOR_CI_DIR": str(folder)}
    proc = subprocess.run(["bash", str(START_SCRIPT)], capture_output=True, text=True, env=env, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("export DOCKER_HOST=")), "")
    started = line.partition("=")[2]
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        problem = f"{START_SCRIPT.name} failed: {tail}"
    else:
        problem = _answers(started) if started else f"{START_SCRIPT.name} printed no DOCKER_HOST"
    if problem is not None:
        stop_private_engine(folder)
        return None, f"{reason}, and no private engine: {problem}", None
    return started, "", folder


def stop_private_engine(folder: Path) -> None:
    """Stop the dockerd of ``folder`` (and the containerd it started), then remove the folder."""
    pid_file = folder / "docker.pid"
    pid = int(pid_file.read_text().strip() or 0) if pid_file.exists() else 0
    if pid:
        _end(pid, timeout=30)
    for leftover in _processes_using(folder):  # dockerd's own containerd, should it outlive it
        _end(leftover, timeout=10)
    shutil.rmtree(folder, onerror=lambda *a: warnings.warn(f"could not remove {a[1]}: {a[2][1]}", stacklevel=1))


def _end(pid: int, timeout: float) -> None:
    """SIGTERM ``pid``, SIGKILL it if it is still there after ``timeout`` s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    warnings.warn(f"pid {pid} ignored SIGTERM for {timeout:g} s; killing it", stacklevel=1)
    os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


def _processes_using(folder: Path) -> list[int]:
    """Processes whose command line names ``folder``: started with this private engine."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(folder) in cmdline:
                found.append(int(entry.name))
    return found


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
def docker_engine() -> Iterator[Engine]:
    host, reason, private = _find_engine()
    if host is None:
        pytest.skip(f"no Docker engine: {reason}")
    import docker

    client = docker.DockerClient(base_url=host, timeout=60)
    _, has_shell = rootfs_tar()
    try:
        yield Engine(host, client, has_shell)
    finally:
        client.close()
        if private is not None:
            stop_private_engine(private)
            left = _processes_using(private)
            assert not left, f"processes of the private Docker engine still run: {left}"


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

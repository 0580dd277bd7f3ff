"""The Docker probe where no engine is needed: a missing SDK, sockets that fail, and parsing."""

from __future__ import annotations

import os
import shlex
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_doctor.container.docker import PROBE, image_facts, record_info, torch_variant
from cuda_doctor.container.reference import InvalidReference, parse_reference, repo_tags_matching
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

pytest.importorskip("docker")


def ctx_for(host: str, *images: str, timeout: float = 1.0) -> ProbeContext:
    return ProbeContext(env={"DOCKER_HOST": host, "PATH": os.defpath}, timeout=timeout, images=images)


@pytest.fixture
def silent_socket(tmp_path: Path) -> Iterator[Path]:
    """A unix socket that accepts connections and never answers, like a wedged daemon."""
    path = tmp_path / "silent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # keep it open, read nothing, answer nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def test_the_probe_does_not_run_under_fast_unless_an_image_is_named() -> None:
    assert PROBE.applies(ProbeContext(fast=False))
    assert not PROBE.applies(ProbeContext(fast=True))
    assert PROBE.applies(ProbeContext(fast=True, images=("nvidia/cuda:13.0.2-base-ubuntu24.04",)))


def test_without_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)  # makes `import docker` raise ImportError
    facts = PROBE.collect(ctx_for("unix:///nonexistent.sock", "nvidia/cuda:12.2.2-base-ubuntu22.04"))
    assert facts.get("docker.status") == "sdk_missing"
    assert "SDK for Python is not installed" in facts.get("docker.error")
    assert facts.get("docker.sdk_python") == shlex.quote(sys.executable)
    assert facts.reason("docker.version") == facts.get("docker.error")
    assert facts.get("image[0].ref") == "nvidia/cuda:12.2.2-base-ubuntu22.04"
    assert "SDK" not in facts.unknown["image[0].found"]  # said once, by CD901


def test_without_the_sdk_and_without_an_engine_the_sdk_is_not_mentioned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    facts = PROBE.collect(ctx_for(f"unix://{tmp_path}/no.sock"))
    assert facts.get("docker.status") == "unreachable"
    assert "SDK" not in facts.get("docker.error") and "no such socket" in facts.get("docker.error")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "docker.sock"))
    try:
        assert PROBE.collect(ctx_for(f"unix://{tmp_path}/docker.sock")).get("docker.status") == "sdk_missing"
    finally:
        listening.close()


def test_a_daemon_that_accepts_and_never_answers(silent_socket: Path) -> None:
    facts = PROBE.collect(ctx_for(f"unix://{silent_socket}", "nvidia/cuda:12.2.2-base-ubuntu22.04"))
    assert facts.get("docker.status") == "timeout"
    assert "did not answer in 1 s" in facts.get("docker.error")
    assert "was not inspected: the Docker engine could not be asked" in (facts.reason("image[0].found") or "")


def test_no_socket_at_all(tmp_path: Path) -> None:
    facts = PROBE.collect(ctx_for(f"unix://{tmp_path / 'missing.sock'}"))
    assert facts.get("docker.status") == "unreachable"
    assert str(tmp_path / "missing.sock") in facts.get("docker.error")


def test_a_path_that_is_not_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "plain-file"
    path.write_text("not a socket")
    facts = PROBE.collect(ctx_for(f"unix://{path}"))
    assert facts.get("docker.status") == "unreachable"
    assert str(path) in facts.get("docker.error")


def test_a_socket_the_user_may_not_open(tmp_path: Path, silent_socket: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: a socket's file mode does not stop root from connecting")
    silent_socket.chmod(0)
    facts = PROBE.collect(ctx_for(f"unix://{silent_socket}"))
    assert facts.get("docker.status") == "permission_denied"
    assert "usermod -aG docker" in facts.get("docker.error")


def test_invalid_references_are_reported_even_when_the_engine_is_down(tmp_path: Path) -> None:
    facts = PROBE.collect(ctx_for(f"unix://{tmp_path / 'missing.sock'}", "nvidia/CUDA:tag", "ok/name:1"))
    assert facts.get("image[0].found") is False
    assert "not a valid image reference" in facts.get("image[0].error")
    assert "image[1].found" in facts.unknown


# -- parsing what the engine returns -----------------------------------------------------


def test_record_info_with_cdi_devices() -> None:
    facts = Facts()
    record_info(
        facts,
        {
            "ServerVersion": "28.2.2",
            "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
            "DefaultRuntime": "runc",
            "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"],
            "DiscoveredDevices": [
                {"Source": "cdi", "ID": "nvidia.com/gpu=0"},
                {"Source": "cdi", "ID": "nvidia.com/gpu=all"},
            ],
        },
    )
    assert facts.get("docker.runtimes") == ["nvidia", "runc"]
    assert facts.get("docker.nvidia_runtime") is True
    assert facts.get("docker.cdi_devices") == ["nvidia.com/gpu=0", "nvidia.com/gpu=all"]
    assert facts.get("docker.cdi_gpu") is True
    assert facts.get("docker.cdi_spec_dirs") == ["/etc/cdi", "/var/run/cdi"]


def test_image_facts_from_an_inspect_document() -> None:
    data = {
        "Id": "sha256:" + "a" * 64,
        "RepoTags": ["nvidia/cuda:12.4.1-base-ubuntu22.04"],
        "Config": {
            "Env": [
                "CUDA_VERSION=12.4.1",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471",
                "NVIDIA_REQUIRE_JETPACK=csv",
                "NVIDIA_DISABLE_REQUIRE=1",
            ],
        },
    }
    facts = image_facts(data, "nvidia/cuda:12.4.1-base-ubuntu22.04")
    assert facts["cuda_version"] == "12.4.1"
    assert facts["nvidia_require_cuda"] == "cuda>=12.4 brand=tesla,driver>=470,driver<471"
    assert facts["require_env"] == {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4 brand=tesla,driver>=470,driver<471"}
    assert facts["nvidia_disable_require"] is True


@pytest.mark.parametrize(
    ("env", "labels", "names", "expected"),
    [
        ({"PYTORCH_VERSION": "2.3.0+cu121"}, {}, [], ("2.3.0+cu121", "12.1")),
        ({"PYTORCH_VERSION": "2.1.0+cu118"}, {}, [], ("2.1.0+cu118", "11.8")),
        ({"TORCH_VERSION": "2.5.0+cpu"}, {}, [], ("2.5.0+cpu", "cpu")),
        ({}, {"org.pytorch.version": "2.11.0+cu130"}, [], (None, "13.0")),
        ({}, {}, ["pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"], ("2.3.0", "12.1")),
        ({}, {}, ["myorg/x:2.3.0-cuda12.1-cudnn8-runtime"], (None, None)),  # not pytorch's naming
        ({"PYTORCH_BUILD_VERSION": "2.5.0a0+872d972e41"}, {}, [], ("2.5.0a0+872d972e41", None)),
    ],
)
def test_torch_variant(
    env: dict[str, str], labels: dict[str, str], names: list[str], expected: tuple[str | None, str | None]
) -> None:
    assert torch_variant(env, labels, names) == expected


@pytest.mark.parametrize(
    ("text", "repository", "tag"),
    [
        ("nvidia/cuda:12.2.2-base-ubuntu22.04", "docker.io/nvidia/cuda", "12.2.2-base-ubuntu22.04"),
        ("ubuntu", "docker.io/library/ubuntu", None),
        ("nvcr.io/nvidia/pytorch:25.12-py3", "nvcr.io/nvidia/pytorch", "25.12-py3"),
        ("localhost:5000/team/img:v1", "localhost:5000/team/img", "v1"),
        ("docker.io/nvidia/cuda@sha256:" + "0" * 64, "docker.io/nvidia/cuda", None),
    ],
)
def test_references(text: str, repository: str, tag: str | None) -> None:
    ref = parse_reference(text)
    assert (ref.repository, ref.tag) == (repository, tag)


@pytest.mark.parametrize(
    "text", ["", "nvidia/CUDA", "Ubuntu", "a b", "nvidia/cuda:", "nvidia//cuda", "-x/y", "x:" + "t" * 200]
)
def test_bad_references(text: str) -> None:
    with pytest.raises(InvalidReference):
        parse_reference(text)


def test_which_local_tags_matter() -> None:
    tags = [
        "nvidia/cuda:13.0.2-base-ubuntu24.04",
        "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "nvcr.io/nvidia/pytorch:25.12-py3",
        "ubuntu:22.04",
        "<none>:<none>",
        "myorg/nvidia-cuda:1",
    ]
    assert repo_tags_matching(tags) == tags[:3]

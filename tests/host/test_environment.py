"""The environment probe against fake file-system roots and recorded environments."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cuda_doctor.base.secrets import is_secret_name as is_secret
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.host.environment import PROBE, parse_memlock

ROOTS = Path(__file__).parents[1] / "fixtures" / "env" / "roots"
FIXTURES = ROOTS.parent


def test_probe_identity() -> None:
    assert PROBE.name == "environment"
    assert PROBE.applies(ProbeContext(fast=True))


def test_h200_container_environment(h200_env: dict[str, str]) -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "docker", env=h200_env))
    v = facts.values
    assert v["env.cuda_visible_devices"] is None  # unset, which means "all GPUs"
    assert v["env.cuda_device_order"] is None
    assert v["env.nvidia_visible_devices"] == "0"
    assert v["env.ld_library_path"] == "/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
    assert v["env.cuda_home"] == "/usr/local/cuda"
    assert v["env.nccl"] == {"NCCL_VERSION": "2.28.3-1"}
    assert v["container.cuda_version"] == "13.0.2"
    assert v["container.nvidia_require_cuda"].startswith("cuda>=13.0 brand=unknown,driver>=535")
    assert v["container.nvidia_disable_require"] is False


def test_empty_cuda_visible_devices_is_not_unset() -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "host", env={"CUDA_VISIBLE_DEVICES": ""}))
    assert facts.values["env.cuda_visible_devices"] == ""  # empty hides every GPU


def test_cuda_path_stands_in_for_cuda_home() -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "host", env={"CUDA_PATH": "/opt/cuda"}))
    assert facts.values["env.cuda_home"] == "/opt/cuda"


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("true", True), ("TRUE", True), ("0", False), ("", False)]
)
def test_nvidia_disable_require(value: str, expected: bool) -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "host", env={"NVIDIA_DISABLE_REQUIRE": value}))
    assert facts.values["container.nvidia_disable_require"] is expected


# -- secrets ---------------------------------------------------------------------------------
def test_secrets_never_become_facts(h200_env: dict[str, str]) -> None:
    secret = "s3cr3t-value-that-must-not-leak"
    env = {
        **h200_env,
        "FOO_TOKEN": secret,
        "AWS_SECRET_ACCESS_KEY": secret,
        "NCCL_IB_PASSWORD": secret,
        "NCCL_api_key": secret,
        "HF_Credentials_FILE": secret,
        "NCCL_DEBUG": "INFO",
        "NCCL_P2P_DISABLE": "1",
    }
    facts = PROBE.collect(ProbeContext(root=ROOTS / "docker", env=env))
    dumped = json.dumps(facts.to_dict())
    assert secret not in dumped
    for name in ("FOO_TOKEN", "AWS_SECRET_ACCESS_KEY", "NCCL_IB_PASSWORD", "NCCL_api_key"):
        assert name not in dumped
    assert facts.values["env.nccl"] == {
        "NCCL_DEBUG": "INFO",
        "NCCL_P2P_DISABLE": "1",
        "NCCL_VERSION": "2.28.3-1",
    }


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True),
        ("ssh_private_key", True),
        ("DB_Password", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("NCCL_SOCKET_IFNAME", False),
        ("CUDA_VISIBLE_DEVICES", False),
    ],
)
def test_is_secret(name: str, secret: bool) -> None:
    assert is_secret(name) is secret


# -- containers ------------------------------------------------------------------------------
def test_docker_root() -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "docker", env={}))
    v = facts.values
    assert v["container.detected"] is True
    assert v["container.runtime"] == "docker"
    assert v["container.cgroup_runtime"] == "docker"
    assert v["container.evidence"] == ["/.dockerenv exists", "/proc/1/cgroup names docker"]


def test_podman_root() -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "podman", env={}))
    assert facts.values["container.runtime"] == "podman"
    assert facts.values["container.cgroup_runtime"] is None  # cgroup v2 namespace shows only "/"


def test_kubernetes_from_env_and_cgroup() -> None:
    by_cgroup = PROBE.collect(ProbeContext(root=ROOTS / "kubernetes", env={}))
    assert by_cgroup.values["container.runtime"] == "kubernetes"
    by_env = PROBE.collect(ProbeContext(root=ROOTS / "host", env={"KUBERNETES_SERVICE_HOST": "10.96.0.1"}))
    assert by_env.values["container.detected"] is True
    assert by_env.values["container.runtime"] == "kubernetes"


def test_no_container() -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "host", env={}))
    assert facts.values["container.detected"] is False
    assert facts.values["container.runtime"] is None
    assert facts.values["container.evidence"] == []
    assert facts.values["container.cuda_version"] is None


def test_unreadable_cgroup_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={}))
    assert facts.values["container.detected"] is False
    assert "cannot read /proc/1/cgroup" in facts.unknown["container.cgroup_runtime"]


# -- system limits ---------------------------------------------------------------------------
def test_memlock_limited_and_unlimited() -> None:
    limited = PROBE.collect(ProbeContext(root=ROOTS / "docker", env={}))
    assert limited.values["system.memlock_bytes"] == 8 * 1024 * 1024
    unlimited = PROBE.collect(ProbeContext(root=ROOTS / "podman", env={}))
    assert unlimited.values["system.memlock_bytes"] is None
    assert "system.memlock_bytes" not in unlimited.unknown


def test_memlock_row_missing_or_file_missing(tmp_path: Path) -> None:
    no_row = PROBE.collect(ProbeContext(root=ROOTS / "host", env={}))
    assert "no 'Max locked memory' row" in no_row.unknown["system.memlock_bytes"]
    no_file = PROBE.collect(ProbeContext(root=tmp_path, env={}))
    assert "cannot read /proc/self/limits" in no_file.unknown["system.memlock_bytes"]


def test_parse_memlock_reads_the_soft_limit() -> None:
    text = (
        (FIXTURES / "limits-memlock-8MiB.txt")
        .read_text()
        .replace("8388608              8388608", "65536                8388608")
    )
    assert parse_memlock(text) == (True, 65536)
    assert parse_memlock("Max locked memory  lots  lots  bytes\n") == (False, None)


def test_shm_size_and_absence(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(ROOTS / "docker", root)
    shm = root / "dev" / "shm"
    stat = os.statvfs(shm)
    facts = PROBE.collect(ProbeContext(root=root, env={}))
    assert facts.values["system.shm_bytes"] == stat.f_blocks * stat.f_frsize
    shutil.rmtree(shm)
    gone = PROBE.collect(ProbeContext(root=root, env={}))
    assert "system.shm_bytes" not in gone.values
    assert gone.unknown["system.shm_bytes"].startswith("cannot stat /dev/shm")


def test_system_identity() -> None:
    facts = PROBE.collect(ProbeContext(root=ROOTS / "docker", env={}))
    assert facts.values["system.os"] == "Ubuntu 24.04.3 LTS"
    assert facts.values["system.is_root"] is (os.geteuid() == 0)
    assert isinstance(facts.values["system.hostname"], str) and facts.values["system.hostname"]
    # without an os-release file the platform names the system
    bare = PROBE.collect(ProbeContext(root=ROOTS / "host", env={}))
    assert bare.values["system.os"].startswith(os.uname().sysname)

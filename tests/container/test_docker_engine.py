"""The Docker probe, the image rules and --run-image against a real Docker engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_doctor.container.docker import PROBE
from cuda_doctor.container.run_image import run_nvidia_smi
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.core.rules import judge_rule, load_rules

from .conftest import CUDA_IMAGE, CUDA_REQUIRE, LEGACY_IMAGE, REPO, TORCH_IMAGE, TRAIN_IMAGE, Engine

pytestmark = pytest.mark.docker

RULES = {rule.id: rule for rule in load_rules()}
H200_FACTS = REPO / "tests" / "rules" / "h200_facts.json"


def probe(engine: Engine, *images: str, run: bool = False) -> Facts:
    ctx = ProbeContext(env=engine.env(), timeout=20, images=images, run_images=run, smoke_timeout=60)
    return PROBE.collect(ctx)


def image_index(facts: Facts, ref: str) -> int:
    return next(i for i in facts.indices("image") if facts.get(f"image[{i}].ref") == ref)


def host_facts(driver: str, cuda: str) -> Facts:
    """The H200 recording's facts, with the driver replaced where a test needs an old one."""
    facts = Facts.from_dict(json.loads(H200_FACTS.read_text()))
    facts.set("driver.version", driver)
    facts.set("driver.cuda_version", cuda)
    facts.set("gpu[0].brand", "NVIDIA")  # nvidia-smi -q on the H200: Product Brand : NVIDIA
    return facts


def test_engine_facts(docker_engine: Engine) -> None:
    facts = probe(docker_engine)
    assert facts.get("docker.status") == "ok"
    assert facts.get("docker.version") == docker_engine.client.version()["Version"]
    assert "runc" in facts.get("docker.runtimes")
    assert facts.get("docker.nvidia_runtime") is ("nvidia" in docker_engine.client.info()["Runtimes"])
    assert isinstance(facts.get("docker.cdi_devices"), list)


def test_local_cuda_images_are_found_and_read(docker_engine: Engine, test_images: dict[str, str]) -> None:
    facts = probe(docker_engine)
    cuda = image_index(facts, CUDA_IMAGE)
    assert facts.get(f"image[{cuda}].found") is True
    assert facts.get(f"image[{cuda}].requested") is False
    assert facts.get(f"image[{cuda}].id") == test_images[CUDA_IMAGE]
    assert facts.get(f"image[{cuda}].cuda_version") == "12.2.2"
    assert facts.get(f"image[{cuda}].nvidia_require_cuda") == CUDA_REQUIRE
    torch = image_index(facts, TORCH_IMAGE)
    assert facts.get(f"image[{torch}].torch_version") == "2.3.0"
    assert facts.get(f"image[{torch}].torch_variant") == "12.1"  # from the pytorch/pytorch tag
    # an image of another repository is only looked at when named
    assert all(facts.get(f"image[{i}].ref") != TRAIN_IMAGE for i in facts.indices("image"))


def test_named_images_come_first_and_bad_ones_say_why(docker_engine: Engine, test_images: dict[str, str]) -> None:
    facts = probe(docker_engine, TRAIN_IMAGE, "Not/A Ref", "nvidia/cuda:11.0-base", LEGACY_IMAGE)
    assert [facts.get(f"image[{i}].ref") for i in range(4)] == [
        TRAIN_IMAGE,
        "Not/A Ref",
        "nvidia/cuda:11.0-base",
        LEGACY_IMAGE,
    ]
    assert facts.get("image[0].torch_variant") == "12.1"  # from PYTORCH_VERSION=2.3.0+cu121
    assert facts.get("image[1].found") is False
    assert "not a valid image reference" in facts.get("image[1].error")
    assert facts.get("image[2].found") is False
    assert "no such image" in facts.get("image[2].error")
    assert facts.get("image[3].cuda_version") == "11.8.0"
    assert facts.get("image[3].nvidia_require_cuda") is None


@pytest.mark.parametrize(
    ("driver", "cuda", "expected"),
    [("580.159.04", "13.0", "pass"), ("470.82.01", "11.4", "fail")],
)
def test_images_judged_against_a_recorded_driver(
    docker_engine: Engine, test_images: dict[str, str], driver: str, cuda: str, expected: str
) -> None:
    facts = host_facts(driver, cuda)
    facts.merge(probe(docker_engine, CUDA_IMAGE, LEGACY_IMAGE))
    assert derive_all(facts) == []
    results = judge_rule(RULES["CD903"], facts)
    assert [r.status.value for r in results[:2]] == [expected, expected]
    if expected == "fail":
        assert "unsatisfied condition: cuda>=12.2" in results[0].message
        assert results[0].fix is not None and "535.54.03" in results[0].fix  # CUDA 12.2 GA's driver
        assert "unsatisfied condition: cuda>=11.8" in results[1].message  # derived from CUDA_VERSION


def test_torch_variant_disagreeing_with_the_base_is_a_warning(
    docker_engine: Engine, test_images: dict[str, str]
) -> None:
    facts = host_facts("580.159.04", "13.0")
    facts.merge(probe(docker_engine, TRAIN_IMAGE))
    derive_all(facts)
    result = judge_rule(RULES["CD905"], facts)[0]
    assert result.status.value == "warn"
    assert "built for CUDA 12.1" in result.message and "12.4.1" in result.message


def test_the_tag_of_a_local_image_is_judged_by_the_catalogue(
    docker_engine: Engine, test_images: dict[str, str]
) -> None:
    facts = host_facts("580.159.04", "13.0")
    facts.merge(probe(docker_engine, CUDA_IMAGE))
    derive_all(facts)
    result = judge_rule(RULES["CD904"], facts)[0]
    assert result.status.value == "pass" and "is supported" in result.message  # 12.2.2: listed in 2025-12


def test_run_image_without_the_toolkit_fails_with_the_toolkit_fix(
    docker_engine: Engine, test_images: dict[str, str]
) -> None:
    if "nvidia" in docker_engine.client.info()["Runtimes"]:
        pytest.skip("this engine has the NVIDIA runtime: 'could not select device driver' cannot happen")
    facts = run_nvidia_smi(docker_engine.client, CUDA_IMAGE, 0, 60)
    assert facts.get("image[0].run_status") == "no_device_driver"
    assert "could not select device driver" in facts.get("image[0].run_error")
    # and through the command line, as a user runs it
    env = {**os.environ, "DOCKER_HOST": docker_engine.host, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_doctor",
            "check",
            "--no-smoke",
            "--image",
            CUDA_IMAGE,
            "--run-image",
            "--select",
            "CD906",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    result = next(r for r in json.loads(proc.stdout)["results"] if r["rule"] == "CD906")
    assert result["status"] == "fail"
    assert any("nvidia-ctk runtime configure --runtime=docker" in c for c in result["commands"])


def test_an_imported_image_really_runs(docker_engine: Engine, test_images: dict[str, str]) -> None:
    if not docker_engine.has_shell:
        pytest.skip("no static busybox on this machine: the imported images have no shell to run")
    out = docker_engine.client.containers.run(CUDA_IMAGE, ["sh", "-c", "echo $CUDA_VERSION"], remove=True)
    assert out.decode().strip() == "12.2.2"


def test_run_status_of_a_command_that_fails_in_the_image(
    docker_engine: Engine, test_images: dict[str, str], tmp_path: Path
) -> None:
    if "nvidia" not in docker_engine.client.info()["Runtimes"]:
        pytest.skip("needs an engine with the NVIDIA runtime to get past device selection")
    facts = run_nvidia_smi(docker_engine.client, CUDA_IMAGE, 0, 60, command=("false",))
    assert facts.get("image[0].run_status") == "failed"

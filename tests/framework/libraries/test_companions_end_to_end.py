"""Companion packages against a real CPU-only torch: a real torchvision's metadata of another
release, the real torchaudio and xformers wheels (CUDA builds), the real fatbin scan of them.
A CPU-only machine gets all of it: nothing here needs a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.core.results import Result
from cuda_doctor.core.rules import judge_rule, load_rules
from cuda_doctor.framework.probe import FrameworkProbe
from tests.artefacts import metadata_only, unpack
from tests.framework.libraries.conftest import TORCHVISION_026

RULES = {rule.id: rule for rule in load_rules()}
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


@pytest.fixture(scope="module")
def judged(
    torch_cpu_python: Path, registry: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str | None, Result]]:
    extra = tmp_path_factory.mktemp("companions")
    metadata_only(registry.wheel_metadata(*TORCHVISION_026), extra, "torchvision", "0.26.0")
    unpack(registry.wheel("torchaudio==2.11.0"), extra)
    unpack(registry.wheel("xformers==0.0.35"), extra)
    ctx = ProbeContext(python=str(torch_cpu_python), env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(extra)})
    facts = FrameworkProbe(fatbin_cache=tmp_path_factory.mktemp("cache") / "fatbin.json").collect(ctx)
    assert derive_all(facts) == []
    return {rule: {r.subject: r for r in judge_rule(RULES[rule], facts)} for rule in ("CD221", "CD222", "CD233")}


@pytest.mark.slow
def test_a_companion_pinned_to_another_torch_fails_with_the_release_for_this_one(
    judged: dict[str, dict[str | None, Result]], torch_cpu_python: Path
) -> None:
    vision = judged["CD221"]["torchvision"]
    assert vision.status.value == "fail"
    assert vision.message == "torchvision 0.26.0 requires torch==2.11.0, but torch is 2.13.0+cpu"
    assert vision.commands == (f"{torch_cpu_python} -m pip install {CPU_INDEX} 'torchvision==0.28.*'",)


@pytest.mark.slow
def test_a_companion_without_a_pin_is_compared_with_the_torch_it_was_made_for(
    judged: dict[str, dict[str | None, Result]],
) -> None:
    audio = judged["CD221"]["torchaudio"]
    assert audio.status.value == "warn"  # no pin: the table's pairing, not pip's, hence no failure
    assert "was made for torch 2.11 (it pins no torch)" in audio.message
    assert "no torchaudio release for torch 2.13 is known" in audio.message
    assert judged["CD221"]["xformers"].status.value == "pass"  # torch>=2.10 holds


@pytest.mark.slow
def test_cuda_builds_under_a_cpu_only_torch_fail(
    judged: dict[str, dict[str | None, Result]], torch_cpu_python: Path
) -> None:
    audio = judged["CD222"]["torchaudio"]
    assert audio.status.value == "fail"
    assert "is a CUDA 13.0 build, but torch is CPU-only" in audio.message
    assert "libc10_cuda.so: cannot open shared object file" in audio.message
    assert audio.commands == (
        f"{torch_cpu_python} -m pip install --force-reinstall --no-deps {CPU_INDEX} 'torchaudio==2.11.0'",
    )
    xformers = judged["CD222"]["xformers"]
    assert xformers.status.value == "fail" and "CUDA 12.8 build" in xformers.message  # read from its cpp_lib.json
    assert xformers.commands == ()  # not on PyTorch's index: no command to print
    assert judged["CD222"]["torchvision"].status.value == "pass"  # metadata only: no build to compare
    assert judged["CD233"][None].status.value == "pass"  # the companions' files are CD222's to judge

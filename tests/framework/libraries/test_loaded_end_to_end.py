"""What loads, end to end: a real child of a real interpreter loads NVIDIA's real CUDA runtime
through a shadowing --target folder on PYTHONPATH, or through LD_LIBRARY_PATH; the framework
probe reports it, the derivers place it, the rules say what to do."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.core.results import Result
from cuda_doctor.core.rules import judge_rule, load_rules
from cuda_doctor.framework.probe import PROBE
from tests.artefacts import install_target
from tests.framework.libraries.conftest import fake_torch

RULES = {rule.id: rule for rule in load_rules()}


def judged(facts: Facts, rule_id: str) -> list[Result]:
    return judge_rule(RULES[rule_id], facts)


def run(python: Path, env: dict[str, str]) -> Facts:
    facts = PROBE.collect(ProbeContext(python=str(python), env=env))
    assert derive_all(facts) == []
    return facts


def test_a_target_folder_on_pythonpath_shadows_the_pinned_runtime(
    plain_python: Path, cuda13_site: Path, registry: Any, tmp_path: Path, base_env: dict[str, str]
) -> None:
    target = install_target(registry.wheel("nvidia-cuda-runtime==13.0.48"), tmp_path / "target")
    pythonpath = f"{target}{os.pathsep}{cuda13_site}"
    facts = run(plain_python, {**base_env, "PYTHONPATH": pythonpath})
    v = facts.values
    runtime = next(i for i in facts.indices("dist") if v[f"dist[{i}].name"] == "nvidia-cuda-runtime")
    assert v[f"dist[{runtime}].version"] == "13.0.48" and v[f"dist[{runtime}].location"] == str(target)
    assert v[f"dist[{runtime}].shadowed"] == [{"version": "13.0.96", "location": str(cuda13_site)}]
    assert v[f"derived.dist[{runtime}].pin"] == "nvidia-cuda-runtime==13.0.96.*"  # through cuda-toolkit[cudart]
    [pin] = [r for r in judged(facts, "CD212") if r.subject == "nvidia-cuda-runtime"]
    assert pin.status.value == "warn"
    assert "shadows the pinned copy (13.0.96 at" in pin.message
    assert pin.commands == (f"export PYTHONPATH={cuda13_site}",)
    [library] = [i for i in facts.indices("cudalib") if v[f"cudalib[{i}].library"] == "cudart"]
    assert v[f"cudalib[{library}].path"] == os.path.realpath(target / "nvidia/cu13/lib/libcudart.so.13")
    assert v[f"cudalib[{library}].version"] == "13.0"  # cudaRuntimeGetVersion, asked of the loaded copy
    assert v[f"cudalib[{library}].distribution"] == "nvidia-cuda-runtime"
    [loaded] = judged(facts, "CD213")
    assert loaded.status.value == "warn" and loaded.subject == "libcudart.so.13"
    assert "nvidia-cuda-runtime 13.0.48" in loaded.message and "nvidia-cuda-runtime==13.0.96.*" in loaded.message
    assert loaded.commands == (f"export PYTHONPATH={cuda13_site}",)
    [missing] = judged(facts, "CD211")  # torch 2.13.0 pins cuDNN, NCCL, … which are not here
    assert missing.status.value == "warn" and "nvidia-nccl-cu13==2.29.7" in missing.message
    assert any("-m pip install" in c and "'nvidia-cudnn-cu13==9.20.0.48'" in c for c in missing.commands)


def test_a_runtime_on_ld_library_path_wins_over_the_wheel(
    plain_python: Path, cuda13_site: Path, registry: Any, tmp_path: Path, base_env: dict[str, str]
) -> None:
    fake_torch(cuda13_site, by_soname=True)  # resolved like a NEEDED entry: LD_LIBRARY_PATH first
    other = install_target(registry.wheel("nvidia-cuda-runtime==13.0.48"), tmp_path / "unpacked")
    system = tmp_path / "cuda-13.0" / "lib64"
    system.mkdir(parents=True)
    shutil.copy(other / "nvidia/cu13/lib/libcudart.so.13", system / "libcudart.so.13")
    facts = run(plain_python, {**base_env, "PYTHONPATH": str(cuda13_site), "LD_LIBRARY_PATH": str(system)})
    facts.set("env.ld_library_path", str(system))  # the environment probe's fact, from the same env
    assert derive_all(facts) == []
    [loaded] = judged(facts, "CD213")
    assert loaded.status.value == "warn"
    assert f"loaded from {system / 'libcudart.so.13'} (a folder on LD_LIBRARY_PATH" in loaded.message
    assert "the pinned version 13.0.96" in loaded.message  # 13.0 is all the runtime says of itself
    assert loaded.commands == ("unset LD_LIBRARY_PATH",)
    [pin] = [r for r in judged(facts, "CD212") if r.subject == "nvidia-cuda-runtime"]
    assert pin.status.value == "pass"  # the installed wheel is right; what loads is not


def test_a_healthy_environment_passes(plain_python: Path, cuda13_site: Path, base_env: dict[str, str]) -> None:
    facts = run(plain_python, {**base_env, "PYTHONPATH": str(cuda13_site)})
    [loaded] = judged(facts, "CD213")
    assert loaded.status.value == "pass"
    assert loaded.message.startswith("libcudart.so.13 13.0 from the nvidia-cuda-runtime 13.0.96 wheel: ")
    statuses = {r.subject: r.status.value for r in judged(facts, "CD212")}
    assert statuses["nvidia-cuda-runtime"] == "pass" and statuses["cuda-toolkit"] == "pass"
    assert judged(facts, "CD214")[0].status.value == "pass"


#: torch's _init check (torch/backends/cudnn/__init__.py) with the versions it compares, as torch
#: 2.x raises it: the stand-in raises torch's own text, the probe reports both versions.
REFUSING_CUDNN = """
class cudnn:
    @staticmethod
    def version():
        raise RuntimeError(
            "cuDNN version incompatibility: PyTorch was compiled  against (9, 24, 0) but found runtime version"
            " (9, 20, 0). PyTorch already comes bundled with cuDNN. One option to resolving this error is to"
            " ensure PyTorch can find the bundled cuDNN. "
        )
"""
CUDNN_MODULE = """
def _cuda_getArchFlags():
    return 'sm_75 sm_80 sm_90'
class _cudnn:
    is_cuda = True
    @staticmethod
    def getCompileVersion():
        return (9, 24, 0)
    @staticmethod
    def getRuntimeVersion():
        return (9, 20, 0)
"""


def test_torch_refusing_its_cudnn_is_reported_with_both_versions(
    plain_python: Path, cuda13_site: Path, base_env: dict[str, str]
) -> None:
    (cuda13_site / "torch" / "backends.py").write_text(REFUSING_CUDNN)
    (cuda13_site / "torch" / "_C.py").write_text(CUDNN_MODULE)
    facts = run(plain_python, {**base_env, "PYTHONPATH": str(cuda13_site)})
    v = facts.values
    assert (v["torch.cudnn_compiled"], v["torch.cudnn_runtime"]) == ("9.24.0", "9.20.0")
    assert "torch.cudnn_version" not in v
    assert "version() raised RuntimeError: cuDNN version incompatibility" in str(facts.reason("torch.cudnn_version"))
    assert v["derived.cudnn.refused"] is True and v["derived.cudnn.needs"] == "cuDNN 9.24 or a newer 9.x"
    assert v["derived.cudnn.error_text"] == (
        "cuDNN version incompatibility: PyTorch was compiled against (9, 24, 0) but found runtime version (9, 20, 0)"
    )

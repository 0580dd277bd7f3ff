"""CDL106: torch.compile in a project whose Dockerfile builds an image with no C compiler.

The cases in ``cases/compile_*`` cover the rule end to end; these pin what decides it: which images
have no compiler, which RUN lines install one (or may), the fix, and where the finding goes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.lint.compiler import compilerless_image
from cuda_doctor.lint.engine import lint_paths
from cuda_doctor.lint.prefilter import needs_ast

RUNTIME = "FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04\n"
SCRIPT = "import torch\n\nmodel = torch.compile(torch.nn.Linear(4, 4))\n"


def _project(tmp_path: Path, dockerfile: str, script: str = SCRIPT, name: str = "train.py") -> Path:
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "Dockerfile").write_text(dockerfile)
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    return path


def _found(path: Path) -> list[tuple[int, str]]:
    return [(f.line, f.rule_id) for f in lint_paths([path]).findings]


@pytest.mark.parametrize(
    ("run", "compiler"),
    [
        ("RUN pip install --no-cache-dir torch numpy", False),
        ("RUN apt-get update && apt-get install -y --no-install-recommends python3-pip git", False),
        ("RUN apt-get -o APT::Install-Recommends=false install -y cmake", False),
        ("RUN apt-get install -y git curl", False),  # their recommends bring no compiler
        ("RUN . /opt/conda/etc/profile.d/conda.sh && conda activate base", False),
        ("RUN apt-get update && apt-get install -y --no-install-recommends gcc", True),
        ("RUN apt-get install -y --no-install-recommends g++-12=12.3.0-1ubuntu1~22.04", True),
        ("RUN DEBIAN_FRONTEND=noninteractive apt-get install -y clang", True),
        ("RUN apt-get install -y --no-install-recommends build-essential", True),
        ("RUN apt-get install -y --no-install-recommends gfortran", True),  # depends on gcc
        ("RUN apt-get update && apt-get install -y python3-pip", True),  # recommends build-essential
        ("RUN apt-get install -y cmake", True),  # recommends gcc
        ("RUN dnf install -y gcc-c++ && dnf clean all", True),
        ("RUN apk add --no-cache --virtual .build-deps build-base", True),
        ("RUN conda install -y -c conda-forge 'gxx_linux-64>=12'", True),
        ("RUN bash -c 'apt-get update && apt-get install -y gcc'", True),
        ("RUN apt-get install -y --no-install-recommends $BUILD_PACKAGES", True),  # cannot tell: in doubt
        ("RUN xargs apt-get install -y < packages.txt", True),
        ("RUN ./scripts/install_deps.sh", True),
        ("RUN curl -fsSL https://example.com/setup | bash", True),
        ("RUN apt-get build-dep -y python3", True),
        ("ENV CC=/opt/toolchain/bin/cc", True),  # the user names a compiler
    ],
)
def test_what_installs_a_compiler(run: str, compiler: bool) -> None:
    found = compilerless_image(f"{RUNTIME}{run}\n", "Dockerfile")
    assert (found is None) is compiler


@pytest.mark.parametrize(
    ("dockerfile", "line"),
    [
        ("FROM nvidia/cuda:12.8.1-base-ubuntu24.04\n", 1),
        ("FROM docker.io/nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04@sha256:" + "0" * 64 + "\n", 1),
        ("FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n", 1),
        ("ARG CUDA=12.8.1\nFROM nvidia/cuda:${CUDA}-runtime-ubuntu24.04\n", 2),  # the flavour is written out
        # the compiler of a builder stage is not in the final image …
        ("FROM nvidia/cuda:12.8.1-devel-ubuntu24.04 AS build\nRUN make\n" + RUNTIME, 3),
        ("FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS build\nRUN apt-get install -y gcc\n" + RUNTIME, 3),
        # … but one installed in a stage the final one builds on is
        ("FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS base\nFROM base\nRUN pip install torch\n", 1),
        ("FROM nvidia/cuda:12.8.1-devel-ubuntu24.04\n", None),
        ("FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel\n", None),
        ("FROM pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime\n", None),  # installs gcc (pytorch#170235)
        ("FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime\n", None),  # before torch.compile
        ("FROM pytorch/pytorch:latest\n", None),
        ("FROM nvcr.io/nvidia/pytorch:24.05-py3\n", None),
        ("FROM ubuntu:24.04\n", None),  # not an image cuda-doctor knows to have no compiler
        ("ARG CUDA\nFROM nvidia/cuda:${CUDA}-runtime-ubuntu24.04\n", None),  # a build argument without a default
        ("ARG FLAVOUR=runtime\nFROM nvidia/cuda:12.8.1-${FLAVOUR}-ubuntu24.04\n", None),  # may be devel at build
        ("ARG BASE=nvidia/cuda:12.8.1-runtime-ubuntu24.04\nFROM ${BASE}\n", None),
        ("FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS base\nRUN apt-get install -y gcc\nFROM base\n", None),
        ("FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04\nFROM scratch\n", None),
    ],
)
def test_which_final_images_have_no_compiler(dockerfile: str, line: int | None) -> None:
    found = compilerless_image(dockerfile, "Dockerfile")
    assert (found.line if found else None) == line


@pytest.mark.parametrize(
    ("dockerfile", "fix"),
    [
        (
            "FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04\n",
            "Base the final stage on `nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04` (the `-devel` flavour of the "
            "same tag), or install a C compiler in it: "
            "`RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev`.",
        ),
        (  # Triton's launcher includes Python.h: the system Python's headers too
            RUNTIME + "RUN apt-get install -y --no-install-recommends python3.11 python3-pip\n",
            "`RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev python3.11-dev`.",
        ),
        (
            "FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n",
            "Base the final stage on `pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel` (the `-devel` flavour of the "
            "same tag), or install a C compiler in it: "
            "`RUN apt-get update && apt-get install -y --no-install-recommends gcc`.",
        ),
        ("FROM nvidia/cuda:12.6.3-base-rockylinux9\n", "`RUN dnf install -y gcc && dnf clean all`."),
        (  # an unsupported patch: the nearest supported devel tag, which the tag checks accept
            "FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04\n",
            "`nvidia/cuda:12.4.1-devel-ubuntu22.04` (the nearest supported `-devel` tag)",
        ),
    ],
)
def test_the_fix(dockerfile: str, fix: str) -> None:
    found = compilerless_image(dockerfile, "Dockerfile")
    assert found is not None and fix in found.fix


@pytest.mark.parametrize(
    "dockerfile",
    [
        "FROM nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04\n",
        "FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04\nRUN apt-get update && apt-get install -y "
        "--no-install-recommends gcc libc6-dev\n",
        "FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel\n",
    ],
)
def test_applying_a_fix_leaves_no_finding(dockerfile: str, tmp_path: Path) -> None:
    assert _found(_project(tmp_path, dockerfile)) == []


def test_the_finding_names_the_call_and_the_dockerfile_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = _project(tmp_path, "# the image\n" + RUNTIME, name="src/train.py")
    [finding] = lint_paths([script]).findings
    assert (finding.path, finding.line, finding.severity.value) == ("src/train.py", 3, "warning")
    assert finding.message.startswith("`torch.compile(…)` will fail at its first compiled step")
    assert "the final stage of `Dockerfile` (line 2: `FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04`)" in finding.message
    assert finding.fix is not None and "`nvidia/cuda:12.8.1-devel-ubuntu24.04`" in finding.fix


@pytest.mark.parametrize(
    ("script", "line"),
    [
        ("import torch\n\n\n@torch.compile\ndef f(x):\n    return x\n", 4),
        ("import torch as T\n\n\n@T.compile(fullgraph=True)\ndef f(x):\n    return x\n", 4),
        ("from torch import compile as tc\n\nmodel = tc(net)\n", 3),
        ("import torch\n\ntry:\n    model = torch.compile(net)\nexcept Exception:\n    pass\n", 4),
        ("import torch\n\nmodel = torch.compile(net, backend='inductor')\n", 3),
        ("import torch\n\nmodel = torch.compile(net, backend='eager')\n", None),  # no C compiler needed
        ("import torch\n\nmodel = torch.compile(net, backend=args.backend)\n", None),  # may be another one
        ("import torch\n\nmodel = torch.compile(net, **options)\n", None),
        ("import torch\n\nmodel = torch.compile(net, disable=True)\n", None),
        ("import torch\n\nmodel.compile()\n", None),  # a method of some object: not torch.compile for sure
        ("code = compile('x = 1', '<string>', 'exec')\n", None),
    ],
)
def test_what_calls_torch_compile(script: str, line: int | None, tmp_path: Path) -> None:
    found = _found(_project(tmp_path, RUNTIME, script))
    assert found == ([(line, "CDL106")] if line else [])


def test_one_finding_per_file_on_its_first_call(tmp_path: Path) -> None:
    script = "import torch\n\na = torch.compile(net)\nb = torch.compile(other)\n"
    assert _found(_project(tmp_path, RUNTIME, script)) == [(3, "CDL106")]


def test_every_dockerfile_of_the_folder_must_lack_a_compiler(tmp_path: Path) -> None:
    script = _project(tmp_path, RUNTIME)
    (tmp_path / "Dockerfile.train").write_text("FROM nvidia/cuda:12.8.1-devel-ubuntu24.04\n")
    assert _found(script) == []  # the code may run in the devel image
    (tmp_path / "Dockerfile.train").write_text("FROM nvidia/cuda:12.8.1-base-ubuntu24.04\n")
    assert _found(script) == [(3, "CDL106")]


def test_only_the_nearest_dockerfiles_above_the_file_count(tmp_path: Path) -> None:
    script = _project(tmp_path, RUNTIME, name="service/train.py")
    (tmp_path / "service" / "Dockerfile").write_text("ARG IMAGE\nFROM ${IMAGE}\n")
    assert _found(script) == []  # its own folder's Dockerfile cannot be judged: not the one above
    sibling = tmp_path / "sibling"
    (sibling / ".git").mkdir(parents=True)
    (sibling / "docker").mkdir()
    (sibling / "docker" / "Dockerfile").write_text(RUNTIME)
    (sibling / "train.py").write_text(SCRIPT)
    assert _found(sibling / "train.py") == []  # a Dockerfile beside, not above: not known to run it


def test_tests_are_not_judged_and_suppression_works(tmp_path: Path) -> None:
    assert _found(_project(tmp_path, RUNTIME, name="tests/test_model.py")) == []
    suppressed = SCRIPT.replace("\nmodel", "\n# cuda-doctor: ignore[CDL106]\nmodel")
    assert _found(_project(tmp_path, RUNTIME, suppressed)) == []


def test_a_compiling_file_is_parsed_only_where_the_image_has_no_compiler() -> None:
    data = b"from torch import compile as tc\nmodel = tc(net)\n"
    assert not needs_ast(data, "train.py")
    assert needs_ast(data, "train.py", compilerless=True)
    assert not needs_ast(data, "tests/test_train.py", compilerless=True)
    assert not needs_ast(b"import torch\nmodel = net.cuda()\n", "train.py", compilerless=True)

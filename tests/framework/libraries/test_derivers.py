"""The library derivers on their own: pins through the toolkit's extras, versions compared,
indexes chosen, error texts read, duplicate copies, build records."""

from __future__ import annotations

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.rules import judge_rule, load_rules
from cuda_doctor.framework.libraries import companions, cuda_init, loaded
from cuda_doctor.framework.libraries.common import compare_versions, index_option, pinned_version, torch_pins

RULES = {rule.id: rule for rule in load_rules()}


def test_pins_through_the_toolkit_extras_torch_asks_for() -> None:
    facts = Facts()
    facts.set("framework.python_version", "3.12.3")
    facts.set(
        "torch.requires",
        [
            'cuda-toolkit[cudart,cufft]==13.0.2; platform_system == "Linux"',
            'nvidia-cublas<=13.1.1.3,>=13.1.0.3; platform_system == "Linux"',
            'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.12"',
            "not a requirement ~~",
        ],
    )
    facts.set(
        "framework.cuda_toolkit_requires",
        [
            "nvidia-cuda-runtime==13.0.96.*; sys_platform == 'linux' and extra == 'cudart'",
            "nvidia-cublas==13.1.0.3.*; extra == 'cublas'",  # an extra torch 2.12 does not ask for
            "nvidia-cufft==12.0.0.61.*; extra == 'cufft'",
            "nvidia-nvjitlink<14,>=13.0.88; extra == 'cufft'",
        ],
    )
    pins = torch_pins(facts)
    assert pins["cuda-toolkit"].requirement == "cuda-toolkit[cudart,cufft]==13.0.2"
    assert pins["nvidia-cuda-runtime"].requirement == "nvidia-cuda-runtime==13.0.96.*"
    assert pins["nvidia-cuda-runtime"].via == "cuda-toolkit"
    assert pins["nvidia-cublas"].via == "torch"  # torch's own pin, not the toolkit's other extra
    assert "nvidia-nvjitlink" in pins and "cuda-bindings" not in pins  # python_version < 3.12 is false here


@pytest.mark.parametrize(
    ("have", "want", "relation"),
    [
        ("13.0", "13.0.96", "same"),
        ("2.28.3", "2.28.9", "older"),
        ("9.24.0", "9.19.0.56", "newer"),
        ("12.8", "13.0.96", "major_differs"),
        (None, "1.0", "unknown"),
    ],
)
def test_versions_compare_on_the_parts_both_have(have: str | None, want: str, relation: str) -> None:
    assert compare_versions(have, want) == relation


def test_pinned_versions() -> None:
    assert pinned_version("==2.28.9") == "2.28.9"
    assert pinned_version("==13.0.96.*") == "13.0.96"
    assert pinned_version("<=13.1.1.3,>=13.1.0.3") is None


@pytest.mark.parametrize(
    ("cuda", "version", "option"),
    [
        (None, "2.13.0+cpu", "--index-url https://download.pytorch.org/whl/cpu"),
        ("13.0", "2.11.0+cu130", ""),  # PyPI's default build of 2.11
        ("12.6", "2.11.0+cu126", "--index-url https://download.pytorch.org/whl/cu126"),
        ("12.9", "2.11.0+cu129", None),  # no such variant of 2.11: no command rather than a wrong one
    ],
)
def test_the_index_a_build_like_torch_comes_from(cuda: str | None, version: str, option: str | None) -> None:
    facts = Facts()
    facts.set("torch.cuda_build", cuda)
    facts.set("torch.version", version)
    assert index_option(facts) == option


def test_pypi_torch_that_did_not_import_has_no_local_label() -> None:
    facts = Facts()
    facts.set("dist[0].name", "torch")
    facts.set("dist[0].version", "2.11.0")
    assert index_option(facts) == ""
    facts.set("dist[0].version", "2.11.0+cu126")
    assert index_option(facts) == "--index-url https://download.pytorch.org/whl/cu126"


@pytest.mark.parametrize(
    ("text", "name", "code"),
    [
        ("CUDA initialization: The NVIDIA driver on your system is too old (found version 12040).", None, 35),
        ("CUDA error: no kernel image is available for execution on the device", None, 209),
        ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.", None, 222),
        ("Error 34: CUDA driver is a stub library", None, 34),
        ("cuInit failed", "CUDA_ERROR_NO_DEVICE", 100),
        ("Error 4242: something new", None, None),
        ("all fine", None, None),
    ],
)
def test_cuda_error_texts_and_names(text: str, name: str | None, code: int | None) -> None:
    row = cuda_init.find_error(text, name)
    assert (row["code"] if row else None) == code


def test_two_copies_of_one_library_are_named() -> None:
    facts = Facts()
    facts.set("torch.requires", [])
    facts.set("framework.cuda_library_count", 2)
    for index, home in enumerate(("/a", "/b")):
        for key, value in {
            "library": "cublas",
            "file": "libcublas.so.13",
            "path": f"{home}/nvidia/cu13/lib/libcublas.so.13",
            "version": "13.1.0.3",
            "distribution": "nvidia-cublas",
            "distribution_version": "13.1.0.3",
            "distribution_location": home,
        }.items():
            facts.set(f"cudalib[{index}].{key}", value)
    loaded.derive(facts)
    first, second = judge_rule(RULES["CD213"], facts)
    assert first.status.value == "pass"
    assert second.status.value == "warn"
    assert (
        second.message
        == "two copies of cublas are loaded: /b/nvidia/cu13/lib/libcublas.so.13 and /a/nvidia/cu13/lib/libcublas.so.13"
    )


@pytest.mark.parametrize(
    ("build", "cuda", "built_for"),
    [
        ({"version.py": "__version__ = '0.20.1+cu124'\ngit_version = 'x'\n"}, "12.4", None),
        ({"version.py": "__version__ = '0.28.0+cpu'\ncuda = None\n"}, "cpu", None),
        ({"cpp_lib.json": '{"version": {"cuda": 1300, "torch": "2.9.0+cu130"}}'}, "13.0", "2.9"),
        (
            {
                "direct_url.json": '{"url": "https://x/flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"}'
            },
            "12.3",
            "2.4",
        ),
        ({"cpp_lib.json": "not json"}, None, None),
        ({}, None, None),
    ],
)
def test_build_records_companions_keep(build: dict[str, str], cuda: str | None, built_for: str | None) -> None:
    found, _source, torch = companions.build_cuda(build)
    assert (found, torch) == (cuda, built_for)

"""The JAX child's pure helpers, in-process (the child itself runs in the tests of the probes)."""

from __future__ import annotations

import warnings

import pytest

from cuda_doctor.jax import _child as child


@pytest.mark.parametrize(
    ("line", "wanted", "expected"),
    [
        ("jaxlib<=0.10.2,>=0.10.1", "jaxlib", "jaxlib<=0.10.2,>=0.10.1"),
        ("jaxlib <=0.4.30, >=0.4.27", "jaxlib", "jaxlib<=0.4.30,>=0.4.27"),
        ('jaxlib==0.10.2; extra == "cuda13"', "jaxlib", None),  # only the extra brings it
        ("jax-cuda13-pjrt==0.10.2", "jax-cuda13-pjrt", "jax-cuda13-pjrt==0.10.2"),
        ('nvidia-cudnn-cu13<10.0,>=9.12.0.46; sys_platform == "linux" and extra == "with-cuda"', "jaxlib", None),
        ("ml_dtypes>=0.5.0", "jaxlib", None),
    ],
)
def test_requirement_of(line: str, wanted: str, expected: str | None) -> None:
    assert child.requirement_of(line, wanted) == expected


@pytest.mark.parametrize(
    ("component", "code", "text"),
    [
        ("cuda", 13000, "13.0"),
        ("cuda", 12090, "12.9"),
        ("cudnn", 91200, "9.12.0"),
        ("cudnn", 90100, "9.1.0"),
        ("cudnn", 8907, "8.9.7"),
        ("cublas", 130000, "13.0.0"),
        ("cublas", 120903, "12.9.3"),
        ("cufft", 12000, "12.0.0"),
        ("cusparse", 12602, "12.6.2"),
        ("cusolver", 12003, "12.0.3"),
        ("cupti", 130000, "130000"),
        ("driver", 12020, "12.2"),
    ],
)
def test_version_text(component: str, code: int, text: str) -> None:
    assert child.version_text(component, code) == text


def test_xla_log_lines_keep_xla_warnings_and_the_cudnn_mismatch() -> None:
    text = "\n".join(
        [
            "some library chatter",
            "E0000 00:00:1764580000.123456   4242 cuda_dnn.cc:466] Loaded runtime CuDNN library: 9.1.0 but source"
            " was compiled with: 9.12.0.  CuDNN library needs to have matching major version and equal or higher"
            " minor version.",
            "W external/xla/xla/service/gpu/nvptx_compiler.cc:930] The NVIDIA driver's CUDA version is 12.2 which"
            " is older than the PTX compiler version 12.9.86.",
            "I0000 00:00:1764580000.1 4242 service.cc:148] XLA service initialized",
        ]
    )
    kept = child.xla_log_lines(text)
    assert len(kept) == 2
    assert "Loaded runtime CuDNN library: 9.1.0" in kept[0]
    assert "older than the PTX compiler version" in kept[1]


def test_kept_warnings_are_jaxs_not_its_dependencies_deprecations() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("numpy.core is deprecated", DeprecationWarning, stacklevel=1)
        warnings.warn("JAX plugin jax_cuda13_plugin version 0.10.1 is installed, but …", RuntimeWarning, stacklevel=1)
        warnings.warn("JAX plugin jax_cuda13_plugin version 0.10.1 is installed, but …", RuntimeWarning, stacklevel=1)
    assert child.kept_warnings(caught) == ["JAX plugin jax_cuda13_plugin version 0.10.1 is installed, but …"]


def test_cuda_error_prefers_the_backends_own_error() -> None:
    texts = [
        "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu."
    ]
    assert child.cuda_error(texts, {"cuda": "No visible GPU devices."}) == "No visible GPU devices."
    assert child.cuda_error(texts, {}) == texts[0]
    failed = (
        "Jax plugin configuration error: Exception when calling jax_plugins.xla_cuda13.initialize()\nRuntimeError: …"
    )
    assert child.cuda_error([texts[0], failed], {}) == failed  # the plugin's failure is the cause
    assert child.cuda_error([], {}) is None


def test_the_child_composes_into_one_python_38_source() -> None:
    """The child with the child-side readers it names (packages, loaded, elf): one namespace."""
    import ast

    from cuda_doctor.base.children import compose
    from cuda_doctor.jax.probe import CHILD_SCRIPT

    composed = compose(CHILD_SCRIPT)
    tree = ast.parse(composed, feature_version=(3, 8))
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert "from cuda_doctor" not in composed
    assert {"loaded_libraries", "installed", "owners"} <= set(names)  # the one reader, reused

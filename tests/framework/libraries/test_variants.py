"""Which of bitsandbytes' per-CUDA libraries loads, as its loader picks (0.45-0.49: the exact
file; 0.50 on: the exact one, else the nearest of the same major)."""

from __future__ import annotations

import pytest

from cuda_doctor.framework.libraries.variants import VariantLibrary, choose, selecting_variables, variant_libraries

SHIPPED_050 = [f"libbitsandbytes_cuda{v}.so" for v in ("118", "121", "124", "126", "128", "130", "132")]
SHIPPED_045 = [f"libbitsandbytes_cuda{v}.so" for v in ("118", "120", "121", "122", "123", "124", "125", "126")]


def bnb() -> VariantLibrary:
    [row] = [r for r in variant_libraries() if r.name == "bitsandbytes"]
    return row


@pytest.mark.parametrize(
    ("version", "files", "torch_cuda", "variable", "loads"),
    [
        ("0.50.2", SHIPPED_050, "12.8", None, "libbitsandbytes_cuda128.so"),  # exact
        ("0.50.2", SHIPPED_050, "12.9", None, "libbitsandbytes_cuda128.so"),  # highest below, same major
        ("0.50.2", SHIPPED_050, "13.1", None, "libbitsandbytes_cuda130.so"),
        ("0.50.2", SHIPPED_050[1:], "11.7", None, None),  # no CUDA 11 library left: never another major
        ("0.50.2", SHIPPED_050[1:], "12.0", None, "libbitsandbytes_cuda121.so"),  # lowest above, same major
        ("0.50.2", SHIPPED_050, "13.0", "126", "libbitsandbytes_cuda126.so"),  # the variable wins
        ("0.50.2", SHIPPED_050, "13.0", "", None),  # empty: bitsandbytes raises, nothing loads
        ("0.50.2", SHIPPED_050, "13.0", "12.6", None),  # not digits: it raises too
        ("0.49.2", SHIPPED_050, "12.9", None, None),  # before 0.50: the exact file or nothing
        ("0.45.5", SHIPPED_045, "12.4", None, "libbitsandbytes_cuda124.so"),
        ("0.45.5", SHIPPED_045, "12.4", "", "libbitsandbytes_cuda124.so"),  # empty is no override there
        ("0.45.5", SHIPPED_045, "12.4", "121", "libbitsandbytes_cuda121.so"),
    ],
)
def test_the_loader_s_choice(
    version: str, files: list[str], torch_cuda: str, variable: str | None, loads: str | None
) -> None:
    choice = choose(bnb(), version, files, torch_cuda, True, variable)
    assert choice.known and choice.loads == loads, choice.why


def test_what_cannot_be_told() -> None:
    assert not choose(bnb(), "0.50.2", SHIPPED_050, "12.8", None, None).known
    assert not choose(bnb(), "not-a-version", SHIPPED_050, "12.8", True, None).known
    no_device = choose(bnb(), "0.50.2", SHIPPED_050, "12.8", False, "124")
    assert no_device.known and no_device.loads is None


def test_the_probe_reads_the_selecting_variable() -> None:
    assert selecting_variables() == ["BNB_CUDA_VERSION"]

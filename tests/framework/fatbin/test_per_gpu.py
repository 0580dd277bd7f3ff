"""The fatbin scan judged per GPU, on a real wheel that ships one library per CUDA version."""

from __future__ import annotations

import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.framework.fatbin.collect import scan_facts
from cuda_doctor.framework.fatbin.derive import derive

STDLIB = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
BITSANDBYTES = "bitsandbytes==0.50.2"


@pytest.fixture(scope="module")
def bnb_scan(unpacked: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fatbin facts of the real bitsandbytes 0.50.2 wheel (libbitsandbytes_cuda118 … _cuda132)."""
    site = unpacked(BITSANDBYTES)
    cache = tmp_path_factory.mktemp("cache") / "fatbin.json"
    values = scan_facts({"sys_path": [str(site)], "stdlib": STDLIB}, 120, cache).values
    # a wheel unpacked by hand has the RECORD pip reads: each library is bitsandbytes'
    assert {f["distribution"] for f in values["fatbin.files"]} == {"bitsandbytes"}
    return values


def judged(scan: dict[str, Any], capability: str, unknown: tuple[str, ...] = (), **extra: Any) -> Facts:
    facts = Facts()
    for name, value in scan.items():
        facts.set(name, value)
    facts.set("gpu.count", 1)
    facts.set("gpu[0].compute_capability", capability)
    facts.set("driver.cuda_version", "13.0")
    facts.set("torch.hip_build", None)
    facts.set("torch.cuda_available", True)
    if "framework.library_variables" not in unknown:
        facts.set("framework.library_variables", {"BNB_CUDA_VERSION": None})
    for name, value in extra.items():
        facts.set(name.replace("__", "."), value)
    for name in unknown:
        facts.mark_unknown(name, "not in an older report")
    derive(facts)
    return facts


def test_only_the_library_torch_s_cuda_picks_is_judged(bnb_scan: dict[str, Any]) -> None:
    """A B200 (sm_100) with a CUDA 12.8 torch: libbitsandbytes_cuda128.so loads and has sm_100;
    cuda118 … cuda126 have no sm_100 but nothing loads them."""
    facts = judged(bnb_scan, "10.0", torch__cuda_build="12.8")
    assert facts.get("derived.gpu[0].kernels_missing") == []
    assert facts.get("derived.gpu[0].device_code_files") == 1
    assert facts.get("derived.fatbin.not_loaded_count") == 6  # the other CUDA libraries


def test_the_chosen_librarys_relocatable_ptx_runs_on_a_newer_gpu(bnb_scan: dict[str, Any]) -> None:
    """CUDA 12.4 torch on an sm_100 GPU: cuda124 loads, SASS up to sm_90 and PTX 8.4 for sm_90 in
    ``__nv_relfatbin``, JIT-linked at load: no kernel is missing."""
    facts = judged(bnb_scan, "10.0", torch__cuda_build="12.4")
    assert facts.get("derived.gpu[0].kernels_missing") == []
    assert facts.get("derived.gpu[0].device_code_files") == 1


def test_the_variable_names_the_library(bnb_scan: dict[str, Any]) -> None:
    variables = {"BNB_CUDA_VERSION": "126"}
    facts = judged(bnb_scan, "10.0", torch__cuda_build="12.8", framework__library_variables=variables)
    not_loaded = " ".join(map(str, facts.get("derived.fatbin.not_loaded")))
    assert "libbitsandbytes_cuda128.so" in not_loaded  # torch's own CUDA version is overridden
    assert "libbitsandbytes_cuda126.so" not in not_loaded


def test_no_cuda_device_loads_no_cuda_library(bnb_scan: dict[str, Any]) -> None:
    facts = judged(bnb_scan, "10.0", torch__cuda_build="12.4", torch__cuda_available=False)
    assert facts.get("derived.gpu[0].kernels_missing") == []
    assert facts.get("derived.fatbin.not_loaded_count") == 7


def test_an_unknown_choice_is_no_failure_and_says_so(bnb_scan: dict[str, Any]) -> None:
    facts = judged(bnb_scan, "10.0", ("framework.library_variables",), torch__cuda_build="12.4")
    assert facts.get("derived.gpu[0].kernels_missing") == []
    assert "BNB_CUDA_VERSION" in facts.get("derived.fatbin.variants_unknown")[0]

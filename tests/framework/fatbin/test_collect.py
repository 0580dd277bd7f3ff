"""The fatbin facts: which folders of an interpreter's sys.path are scanned, and what they say."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.fatbin.collect import scan_facts, site_dirs
from cuda_doctor.framework.probe import FrameworkProbe
from tests.artefacts import unpack

ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}
STDLIB = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]


def test_the_package_folders_in_order_not_the_stdlib(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    (second / "nested").mkdir(parents=True)
    first.mkdir()
    site = sysconfig.get_paths()["purelib"]
    paths = ["", str(first), str(tmp_path / "missing"), str(second), str(second / "nested"), str(first), *STDLIB, site]
    roots = site_dirs({"sys_path": paths, "stdlib": STDLIB})
    assert roots == [str(first), str(second), str(second / "nested"), os.path.realpath(site)]


def test_facts_of_a_real_scan(registry: Any, tmp_path: Path) -> None:
    extra = unpack(registry.wheel("nvidia-cufile==1.15.1.6"), tmp_path / "extra")
    v = scan_facts({"sys_path": [str(extra)], "stdlib": STDLIB}, 60, tmp_path / "cache.json").values
    assert v["fatbin.site_dirs"] == [str(extra)]
    assert v["fatbin.complete"] is True and v["fatbin.incomplete_reason"] is None
    [cufile] = [f for f in v["fatbin.files"] if f["path"].endswith("libcufile.so.0")]
    assert cufile == {
        "path": os.path.realpath(extra / "nvidia/cu13/lib/libcufile.so.0"),
        "distribution": "nvidia-cufile",
        "distribution_version": "1.15.1.6",
        "sass": [75, 80, 86],
        "sass_specific": [],
        "ptx": [[86, "7.1"]],
        "cudart": None,
        "c10_cuda": False,
        "torch": False,
        "complete": True,
    }
    assert (tmp_path / "cache.json").is_file() and v["fatbin.cache_error"] is None
    again = scan_facts({"sys_path": [str(extra)], "stdlib": STDLIB}, 60, tmp_path / "cache.json").values
    assert again["fatbin.files_read"] == 0 and again["fatbin.files"] == v["fatbin.files"]


def test_the_framework_probe_scans_what_its_child_reports(registry: Any, tmp_path: Path) -> None:
    extra = unpack(registry.wheel("nvidia-cufile==1.15.1.6"), tmp_path / "extra")
    probe = FrameworkProbe(fatbin_cache=tmp_path / "cache.json")
    facts = probe.collect(ProbeContext(python=sys.executable, env={**ENV, "PYTHONPATH": str(extra)}))
    assert facts.values["fatbin.site_dirs"][0] == str(extra)
    assert any(f["path"].endswith("libcufile.so.0") for f in facts.values["fatbin.files"])


def test_an_interpreter_that_cannot_run_scans_nothing(tmp_path: Path) -> None:
    probe = FrameworkProbe(fatbin_cache=tmp_path / "cache.json")
    facts = probe.collect(ProbeContext(python=str(tmp_path / "nope"), env=ENV))
    assert facts.unknown["fatbin.files"] == f"{tmp_path / 'nope'} did not report its sys.path to the framework probe"
    assert not (tmp_path / "cache.json").exists()

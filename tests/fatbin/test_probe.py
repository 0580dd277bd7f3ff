"""The fatbin probe against real interpreters: which folders it scans, and its facts."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from cuda_doctor.fatbin.probe import FatbinProbe, site_dirs
from cuda_doctor.probes.base import ProbeContext
from tests.artefacts import unpack

ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


def test_the_interpreters_package_folders_in_order_not_its_stdlib(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    (second / "nested").mkdir(parents=True)
    first.mkdir()
    pythonpath = os.pathsep.join([str(first), str(tmp_path / "missing"), str(second), str(second / "nested")])
    roots, why = site_dirs(ProbeContext(python=sys.executable, env={**ENV, "PYTHONPATH": pythonpath}))
    assert why == "" and roots is not None
    assert roots[:3] == [str(first), str(second), str(second / "nested")]  # PYTHONPATH first, in order
    assert not any(root.endswith(("lib-dynload", "python3.11")) for root in roots)
    assert any(root.endswith(("site-packages", "dist-packages")) for root in roots)


def test_an_interpreter_that_cannot_run(tmp_path: Path) -> None:
    facts = FatbinProbe(cache_path=tmp_path / "c.json").collect(ProbeContext(python=str(tmp_path / "nope"), env=ENV))
    assert facts.values == {}
    assert facts.unknown["fatbin.files"].startswith(f"could not run {tmp_path / 'nope'}")


def test_facts_of_a_real_scan(registry: Any, tmp_path: Path) -> None:
    extra = unpack(registry.wheel("nvidia-cufile==1.15.1.6"), tmp_path / "extra")
    probe = FatbinProbe(cache_path=tmp_path / "cache.json")
    facts = probe.collect(ProbeContext(python=sys.executable, env={**ENV, "PYTHONPATH": str(extra)}))
    v = facts.values
    assert v["fatbin.site_dirs"][0] == str(extra)
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
    again = probe.collect(ProbeContext(python=sys.executable, env={**ENV, "PYTHONPATH": str(extra)}))
    assert again.values["fatbin.files_read"] == 0 and again.values["fatbin.files"] == v["fatbin.files"]
    assert not probe.applies(ProbeContext(fast=True))

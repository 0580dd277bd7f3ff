"""The toolkit probe with a fake ``nvcc`` on PATH that prints a real nvcc's output."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.host.toolkit import PROBE, parse_nvcc_version

MakeExe = Callable[[str, str], Path]
NVCC_13 = Path(__file__).parents[1] / "fixtures" / "env" / "nvcc-13.0-version.txt"
# Absolute paths: several tests run nvcc with a PATH that holds nothing else.
CAT = shutil.which("cat") or "/bin/cat"
SLEEP = shutil.which("sleep") or "/bin/sleep"
PRINT_NVCC_13 = f"{CAT} {shlex.quote(str(NVCC_13))}"


@pytest.fixture
def fake_nvcc(make_executable: MakeExe) -> Path:
    return make_executable("nvcc", PRINT_NVCC_13)


def test_probe_identity() -> None:
    assert PROBE.name == "toolkit"
    assert PROBE.applies(ProbeContext())
    assert not PROBE.applies(ProbeContext(fast=True))  # --fast: NVML, environment and container only


def test_nvcc_on_path(fake_nvcc: Path, tmp_path: Path) -> None:
    env = {"PATH": f"{fake_nvcc.parent}{os.pathsep}{os.defpath}"}
    facts = PROBE.collect(ProbeContext(root=tmp_path, env=env))
    assert facts.values["toolkit.nvcc_path"] == str(fake_nvcc)
    assert facts.values["toolkit.nvcc_version"] == "13.0"
    assert facts.values["toolkit.nvcc_full_version"] == "13.0.88"


def test_nvcc_under_cuda_home(make_executable: MakeExe, tmp_path: Path) -> None:
    home = tmp_path / "cuda-13.0"
    (home / "bin").mkdir(parents=True)
    nvcc = make_executable("nvcc", PRINT_NVCC_13)
    nvcc.rename(home / "bin" / "nvcc")
    env = {"PATH": str(tmp_path / "empty"), "CUDA_HOME": str(home)}
    facts = PROBE.collect(ProbeContext(root=tmp_path, env=env))
    assert facts.values["toolkit.nvcc_path"] == str(home / "bin" / "nvcc")
    assert facts.values["toolkit.nvcc_version"] == "13.0"


def test_nvcc_in_the_default_location_of_the_root(make_executable: MakeExe, tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr/local/cuda/bin").mkdir(parents=True)
    make_executable("nvcc", PRINT_NVCC_13).rename(root / "usr/local/cuda/bin/nvcc")
    facts = PROBE.collect(ProbeContext(root=root, env={"PATH": str(tmp_path / "empty")}))
    assert facts.values["toolkit.nvcc_path"] == str(root / "usr/local/cuda/bin/nvcc")
    assert facts.values["toolkit.nvcc_version"] == "13.0"


def test_no_nvcc_is_a_known_absence(tmp_path: Path) -> None:
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": str(tmp_path / "empty")}))
    assert facts.values["toolkit.nvcc_path"] is None
    assert facts.values["toolkit.nvcc_version"] is None
    assert facts.unknown == {}


def test_failing_nvcc(make_executable: MakeExe, tmp_path: Path) -> None:
    nvcc = make_executable("nvcc", "echo 'nvcc fatal: cannot find libnvvm' >&2; exit 1")
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": str(nvcc.parent)}))
    assert facts.values["toolkit.nvcc_path"] == str(nvcc)
    assert facts.unknown["toolkit.nvcc_version"] == ("nvcc exited with status 1: nvcc fatal: cannot find libnvvm")


def test_hanging_nvcc(make_executable: MakeExe, tmp_path: Path) -> None:
    nvcc = make_executable("nvcc", f"exec {SLEEP} 30")
    ctx = ProbeContext(root=tmp_path, env={"PATH": str(nvcc.parent)}, timeout=0.5)
    facts = PROBE.collect(ctx)
    assert facts.unknown["toolkit.nvcc_version"] == "nvcc did not answer in 0.5 s"


def test_unparseable_nvcc(make_executable: MakeExe, tmp_path: Path) -> None:
    nvcc = make_executable("nvcc", "echo 'nvcc: something else entirely'")
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": str(nvcc.parent)}))
    assert "no 'release X.Y, VX.Y.Z'" in facts.unknown["toolkit.nvcc_version"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (NVCC_13.read_text(), ("13.0", "13.0.88")),
        ("Cuda compilation tools, release 12.4, V12.4.131\n", ("12.4", "12.4.131")),
        ("Cuda compilation tools, release 11.8, V11.8.89\n", ("11.8", "11.8.89")),
        ("nothing here", None),
    ],
)
def test_parse_nvcc_version(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_nvcc_version(text) == expected

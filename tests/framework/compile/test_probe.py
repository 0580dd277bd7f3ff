"""The compile probe against a real plain interpreter, a fake triton package on its PYTHONPATH,
fake compilers, ptxas and ldconfig, and a fake root with its own mountinfo: never this machine's
compilers, driver or mounts."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.core.rules import judge_rule, load_rule_file
from cuda_doctor.framework.compile import derive
from cuda_doctor.framework.compile._child import CHILD_FACTS
from cuda_doctor.framework.compile.probe import COMPILE_FACTS, PROBE, CompileProbe

MakeExe = Callable[[str, str], Path]
REPO = Path(__file__).resolve().parents[3]
#: A root with its own mounts: / on ext4, /home on NFS, /tmp a noexec tmpfs, /data read-only.
MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:50 / /home rw,relatime shared:2 - nfs4 filer:/export/home rw,vers=4.2
24 22 0:51 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=65536k
25 22 8:2 / /data ro,relatime - xfs /dev/sdb1 ro
26 22 0:52 / /mnt/my\\040bucket rw - fuse.gcsfuse bucket rw
"""
RELEASE = "echo 'ptxas: NVIDIA (R) Ptx optimizing assembler'; echo 'Cuda compilation tools, release {}, V{}.0'"


def write_exe(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for folder in ("proc/self", "home/alice", "tmp", "var/tmp", "data", "sbin"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "proc/self/mountinfo").write_text(MOUNTINFO, encoding="utf-8")
    return root


def fake_triton(site: Path, version: str = "3.6.0", libraries: str = "['libcuda.so.1']", split: bool = True) -> Path:
    """A ``triton`` package as the child reads it: its version, the driver module's ``libraries``,
    the knobs that name ptxas-blackwell, and bundled ptxas programs that print their release."""
    package = site / "triton"
    (package / "backends" / "nvidia").mkdir(parents=True)
    (package / "__init__.py").write_text(f"__version__ = '{version}'\nraise ImportError('never imported')\n")
    (package / "backends" / "nvidia" / "driver.py").write_text(f"import os\nlibraries = {libraries}\n")
    if split:
        (package / "knobs.py").write_text('ptxas_blackwell = env_nvidia_tool("ptxas-blackwell")\n')
    write_exe(package / "backends" / "nvidia" / "bin" / "ptxas", RELEASE.format("12.8", "12.8"))
    write_exe(package / "backends" / "nvidia" / "bin" / "ptxas-blackwell", RELEASE.format("12.9", "12.9"))
    return package


def context(tmp_path: Path, root: Path, bindir: Path, python: str, **env: str) -> ProbeContext:
    """A machine-independent environment: PATH only ``bindir``, a home and caches of the fake root."""
    real_tmp = tmp_path / "real-tmp"
    real_tmp.mkdir(exist_ok=True)
    bindir.mkdir(exist_ok=True)
    base = {
        "PATH": str(bindir),
        "LANG": "C.UTF-8",
        "HOME": "/home/alice",
        "USER": "alice",
        "TMPDIR": str(real_tmp),
        "TRITON_CACHE_DIR": "/home/alice/.triton/cache",
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_alice",
    }
    return ProbeContext(root=root, env={**base, **env}, python=python, timeout=5)


def accounted(facts: Facts) -> None:
    assert set(COMPILE_FACTS) <= set(facts.values) | set(facts.unknown)


# -- the probe's switches -------------------------------------------------------------------------
def test_identity_and_fast_mode() -> None:
    assert PROBE.name == "compile"
    assert PROBE.applies(ProbeContext(fast=False))
    assert not PROBE.applies(ProbeContext(fast=True))
    assert CompileProbe().deadline(ProbeContext(timeout=10)) > CompileProbe().child_timeout(ProbeContext(timeout=10))


# -- a plain interpreter: no triton, no compilers ------------------------------------------------------
def test_no_compilers_and_no_triton(plain_python: Path, tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    ctx = context(tmp_path, root, tmp_path / "empty-bin", str(plain_python))
    facts = PROBE.collect(ctx)
    v = facts.values
    assert v["compile.python"] == str(plain_python)
    assert v["compile.triton_installed"] is False
    assert v["compile.cc"] is None and v["compile.cc_source"] is None and v["compile.cc_on_path"] is None
    assert v["compile.cc_works"] is False
    assert v["compile.cc_error"] == "CC is not set and neither gcc nor clang is on PATH"
    assert v["compile.cxx"] == "g++" and v["compile.cxx_source"] == "default" and v["compile.cxx_path"] is None
    assert v["compile.cxx_works"] is False and "cannot run g++" in v["compile.cxx_error"]
    assert v["compile.python_h"] == (Path(v["compile.python_include"]) / "Python.h").is_file()
    for name in ("compile.triton_version", "compile.libcuda_dirs", "compile.ptxas_path"):
        assert facts.unknown[name] == f"triton is not installed in {plain_python}"
    assert v["compile.triton_cache.path"] == "/home/alice/.triton/cache"
    assert v["compile.triton_cache.from"] == "TRITON_CACHE_DIR"
    assert v["compile.user"] == "alice" and v["compile.home"] == "/home/alice"
    accounted(facts)


def test_the_default_cache_folders(plain_python: Path, tmp_path: Path) -> None:
    """No cache variables: Triton's under TRITON_HOME or ~, Inductor's under the temporary folder."""
    root = fake_root(tmp_path)
    env = context(tmp_path, root, tmp_path / "empty-bin", str(plain_python)).env
    env = {k: v for k, v in env.items() if k not in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    facts = PROBE.collect(ProbeContext(root=root, env={**env, "USER": "a/b"}, python=str(plain_python), timeout=5))
    v = facts.values
    assert v["compile.triton_cache.path"] == "/home/alice/.triton/cache"
    assert v["compile.triton_cache.from"] == "default"
    assert v["compile.inductor_cache.path"] == str(tmp_path / "real-tmp" / "torchinductor_a_b")  # "/" made "_"
    moved = {**env, "TRITON_HOME": "/data/alice"}
    facts = PROBE.collect(ProbeContext(root=root, env=moved, python=str(plain_python), timeout=5))
    assert facts.values["compile.triton_cache.path"] == "/data/alice/.triton/cache"
    assert facts.values["compile.triton_cache.from"] == "TRITON_HOME"


# -- the caches' mounts -----------------------------------------------------------------------------------
def test_caches_on_nfs_and_noexec_mounts(plain_python: Path, tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    fake_triton(tmp_path / "site")  # the rules judge only where triton is installed
    ctx = context(tmp_path, root, tmp_path / "empty-bin", str(plain_python), PYTHONPATH=str(tmp_path / "site"))
    facts = PROBE.collect(ctx)
    v = facts.values
    assert v["compile.triton_cache.existing"] == "/home/alice"  # .triton/cache is made when first used
    assert (v["compile.triton_cache.fstype"], v["compile.triton_cache.mount_point"]) == ("nfs4", "/home")
    assert v["compile.triton_cache.network"] is True and v["compile.triton_cache.noexec"] is False
    assert v["compile.inductor_cache.existing"] == "/tmp"
    assert v["compile.inductor_cache.fstype"] == "tmpfs"
    assert v["compile.inductor_cache.noexec"] is True and v["compile.inductor_cache.network"] is False
    assert "noexec" in v["compile.inductor_cache.options"]
    assert v["compile.local_cache_base"] == "/var/tmp"  # /tmp is noexec, /home is NFS
    # judged: the noexec cache is an error, the NFS one a warning, each with its export
    facts.merge(Facts({"gpu.count": 0, "system.os_family": "debian", "driver.cuda_version": "13.0"}))
    derive.derive(facts)
    unusable = judge_rule(load_rule_file(REPO / "rules" / "CD268.toml"), facts)[0]
    assert unusable.status.value == "fail" and "/tmp (tmpfs) is mounted noexec" in unusable.message
    assert unusable.commands == ("export TORCHINDUCTOR_CACHE_DIR=/var/tmp/torchinductor_alice",)
    network = judge_rule(load_rule_file(REPO / "rules" / "CD269.toml"), facts)[0]
    assert network.status.value == "warn" and "/home (nfs4), a network file system" in network.message
    assert network.commands == ("export TRITON_CACHE_DIR=/var/tmp/triton-cache",)


def test_a_read_only_mount_and_a_fuse_mount_with_a_space(plain_python: Path, tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    (root / "mnt" / "my bucket").mkdir(parents=True)
    ctx = context(
        tmp_path,
        root,
        tmp_path / "empty-bin",
        str(plain_python),
        TRITON_CACHE_DIR="/data/cache",
        TORCHINDUCTOR_CACHE_DIR="/mnt/my bucket/inductor",
    )
    v = PROBE.collect(ctx).values
    assert v["compile.triton_cache.readonly"] is True and v["compile.triton_cache.writable"] is False
    assert v["compile.inductor_cache.mount_point"] == "/mnt/my bucket"
    assert v["compile.inductor_cache.fstype"] == "fuse.gcsfuse" and v["compile.inductor_cache.network"] is True


def test_unreadable_mounts_and_a_relative_cache(plain_python: Path, tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    (root / "proc/self/mountinfo").unlink()
    ctx = context(tmp_path, root, tmp_path / "empty-bin", str(plain_python), TRITON_CACHE_DIR="cache")
    facts = PROBE.collect(ctx)
    assert "relative path" in facts.unknown["compile.triton_cache.writable"]
    assert facts.unknown["compile.inductor_cache.fstype"].startswith("cannot read /proc/self/mountinfo")
    assert facts.values["compile.inductor_cache.existing"] == "/tmp"  # the folder is still found
    assert "mountinfo" in facts.unknown["compile.local_cache_base"]
    accounted(facts)


# -- a fake triton ------------------------------------------------------------------------------------------
def triton_setup(tmp_path: Path, make_executable: MakeExe, **triton: object) -> tuple[Path, Path, Path]:
    """(root, bin folder, site folder): gcc and g++ on PATH, a triton on PYTHONPATH, an ldconfig
    under the root that lists a driver folder holding libcuda.so.1 only."""
    root = fake_root(tmp_path)
    make_executable("gcc", "echo 'gcc (Fake) 13.3.0'")
    make_executable("g++", "echo 'g++ (Fake) 13.3.0'")
    site = tmp_path / "site"
    fake_triton(site, **triton)  # type: ignore[arg-type]
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "libcuda.so.1").write_bytes(b"")
    write_exe(
        root / "sbin" / "ldconfig",
        f"echo '3 libs found in cache'\necho '\tlibcuda.so.1 (libc6,x86-64) => {driver}/libcuda.so.1'",
    )
    return root, tmp_path / "bin", site


def test_a_triton_3_6_with_compilers(plain_python: Path, tmp_path: Path, make_executable: MakeExe) -> None:
    root, bindir, site = triton_setup(tmp_path, make_executable)
    facts = PROBE.collect(context(tmp_path, root, bindir, str(plain_python), PYTHONPATH=str(site)))
    v = facts.values
    assert v["compile.triton_installed"] is True
    assert v["compile.triton_version"] == "3.6.0"  # read from the package, which is never imported
    assert v["compile.triton_path"] == str(site / "triton")
    assert (v["compile.cc"], v["compile.cc_source"]) == (str(bindir / "gcc"), "PATH")
    assert v["compile.cc_works"] is True and v["compile.cc_version"] == "gcc (Fake) 13.3.0"
    assert v["compile.cxx_path"] == str(bindir / "g++") and v["compile.cxx_works"] is True
    driver = str(tmp_path / "driver")
    assert v["compile.libcuda_libraries"] == ["libcuda.so.1"]
    assert (v["compile.libcuda_source"], v["compile.libcuda_dirs"]) == ("ldconfig", [driver])
    assert v["compile.libcuda_so1_dirs"] == [driver] and v["compile.libcuda_so_dirs"] == []
    assert v["compile.libcuda_candidates"] == [driver]
    bundled = site / "triton" / "backends" / "nvidia" / "bin"
    assert (v["compile.ptxas_path"], v["compile.ptxas_version"]) == (str(bundled / "ptxas"), "12.8")
    assert v["compile.ptxas_source"] == "triton" and v["compile.ptxas_error"] is None
    assert v["compile.ptxas_split"] is True and v["compile.ptxas_blackwell_version"] == "12.9"
    assert facts.unknown == {}
    # triton 3.6 links libcuda.so.1 itself: no libcuda.so needed
    facts.merge(Facts({"gpu.count": 0, "system.os_family": "debian"}))
    derive.derive(facts)
    assert facts.get("derived.compile.libcuda_state") == "ok"


def test_triton_3_5_needs_libcuda_so(plain_python: Path, tmp_path: Path, make_executable: MakeExe) -> None:
    root, bindir, site = triton_setup(tmp_path, make_executable, version="3.5.1", libraries="['cuda']", split=False)
    facts = PROBE.collect(context(tmp_path, root, bindir, str(plain_python), PYTHONPATH=str(site)))
    assert facts.values["compile.ptxas_split"] is False and facts.values["compile.ptxas_blackwell_path"] is None
    facts.merge(Facts({"gpu.count": 0, "system.os_family": "debian", "system.is_root": False}))
    derive.derive(facts)
    assert facts.get("derived.compile.libcuda_state") == "not_linkable"
    assert facts.get("derived.compile.libcuda_flag") == "-lcuda"
    assert f"ln -sf {tmp_path}/driver/libcuda.so.1 /home/alice/.triton/libcuda/libcuda.so" in str(
        facts.get("derived.compile.libcuda_command")
    )


def test_ptxas_from_the_environment_torch_and_a_fallback(
    plain_python: Path, tmp_path: Path, make_executable: MakeExe
) -> None:
    root, bindir, site = triton_setup(tmp_path, make_executable)
    broken = write_exe(tmp_path / "broken" / "ptxas", "echo 'ptxas: cannot start' >&2; exit 1")
    ctx = context(tmp_path, root, bindir, str(plain_python), PYTHONPATH=str(site), TRITON_PTXAS_PATH=str(broken))
    v = PROBE.collect(ctx).values
    assert v["compile.ptxas_source"] == "triton" and v["compile.ptxas_version"] == "12.8"  # Triton falls back
    assert f"{broken} --version exited with status 1: ptxas: cannot start" in v["compile.ptxas_error"]
    # torch.compile first puts torch's bin/ptxas in TRITON_PTXAS_PATH (found without importing torch)
    torch = site / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text("raise ImportError('never imported')\n")
    write_exe(torch / "bin" / "ptxas", RELEASE.format("13.0", "13.0"))
    v = PROBE.collect(context(tmp_path, root, bindir, str(plain_python), PYTHONPATH=str(site))).values
    assert (v["compile.ptxas_source"], v["compile.ptxas_version"]) == ("torch", "13.0")
    assert v["compile.ptxas_blackwell_source"] == "triton"  # torch's does not replace ptxas-blackwell


def test_a_broken_cc_a_hanging_cxx_and_libcuda_from_ld_library_path(
    plain_python: Path, tmp_path: Path, make_executable: MakeExe
) -> None:
    root, bindir, site = triton_setup(tmp_path, make_executable)
    write_exe(root / "sbin" / "ldconfig", "echo '0 libs found in cache'")
    broken = make_executable("cc-broken", "echo 'cc1: fatal error: no licence' >&2; exit 4")
    hanging = tmp_path / "bin" / "cxx-hangs"
    hanging.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    hanging.chmod(0o755)
    ld_path = f"/nonexistent:{tmp_path / 'driver'}"
    env = {"PYTHONPATH": str(site), "CC": str(broken), "CXX": str(hanging), "LD_LIBRARY_PATH": ld_path}
    ctx = context(tmp_path, root, bindir, str(plain_python), **env).but(timeout=1)
    v = PROBE.collect(ctx).values
    assert (v["compile.cc"], v["compile.cc_source"], v["compile.cc_works"]) == (str(broken), "CC", False)
    assert v["compile.cc_error"] == f"{broken} --version exited with status 4: cc1: fatal error: no licence"
    assert v["compile.cc_on_path"] == str(bindir / "gcc")
    assert v["compile.cxx_works"] is False and v["compile.cxx_error"] == f"{hanging} --version did not answer in 1 s"
    assert (v["compile.libcuda_source"], v["compile.libcuda_dirs"]) == ("LD_LIBRARY_PATH", [str(tmp_path / "driver")])


def test_no_ldconfig_and_a_pinned_folder(plain_python: Path, tmp_path: Path, make_executable: MakeExe) -> None:
    root, bindir, site = triton_setup(tmp_path, make_executable)
    (root / "sbin" / "ldconfig").unlink()
    v = PROBE.collect(context(tmp_path, root, bindir, str(plain_python), PYTHONPATH=str(site))).values
    assert v["compile.libcuda_dirs"] == [] and v["compile.libcuda_source"] is None
    assert v["compile.libcuda_error"].startswith(f"cannot run {root}/sbin/ldconfig -p")
    pinned = {"PYTHONPATH": str(site), "TRITON_LIBCUDA_PATH": str(tmp_path / "driver")}
    v = PROBE.collect(context(tmp_path, root, bindir, str(plain_python), **pinned)).values
    assert (v["compile.libcuda_source"], v["compile.libcuda_error"]) == ("TRITON_LIBCUDA_PATH", None)
    assert v["compile.libcuda_so1_dirs"] == [str(tmp_path / "driver")]


# -- interpreters that do not answer ------------------------------------------------------------------------
def test_an_interpreter_that_fails(tmp_path: Path, make_executable: MakeExe) -> None:
    python = make_executable("python", "echo 'boom: no such module' >&2; exit 3")
    facts = PROBE.collect(ProbeContext(root=fake_root(tmp_path), env={"PATH": os.defpath}, python=str(python)))
    assert facts.unknown["compile.cc"] == f"{python} exited with status 3 in the compile probe: boom: no such module"
    assert set(CHILD_FACTS) <= set(facts.unknown)


def test_an_interpreter_that_is_missing(tmp_path: Path) -> None:
    facts = PROBE.collect(ProbeContext(root=fake_root(tmp_path), python=str(tmp_path / "no-python"), timeout=2))
    assert facts.unknown["compile.triton_installed"].startswith(f"could not run {tmp_path / 'no-python'}")


def test_a_report_without_values(tmp_path: Path, make_executable: MakeExe) -> None:
    python = make_executable("python", 'echo \'{"started": true}\'; echo \'{"values": 1, "unknown": {}}\'')
    facts = PROBE.collect(ProbeContext(root=fake_root(tmp_path), env={"PATH": os.defpath}, python=str(python)))
    assert "without 'values' and 'unknown'" in facts.unknown["compile.cc"]


@pytest.mark.parametrize("report", [{"values": {"compile.cc": None, "other.fact": 1}, "unknown": {"x.y": "z"}}])
def test_only_compile_facts_are_kept(report: dict[str, object], tmp_path: Path, make_executable: MakeExe) -> None:
    python = make_executable("python", f"echo '{{\"started\": true}}'; echo '{json.dumps(report)}'")
    facts = PROBE.collect(ProbeContext(root=fake_root(tmp_path), env={"PATH": os.defpath}, python=str(python)))
    assert "other.fact" not in facts.values and "x.y" not in facts.unknown
    assert facts.values["compile.cc"] is None
    assert facts.unknown["compile.cc_works"] == f"{python} did not report it"

"""The process environment, the container around it, and system limits that training hits (from
``ctx.env`` and files under ``ctx.root``; credentials never become facts)."""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path

from cuda_doctor.base.reading import read_text
from cuda_doctor.base.secrets import is_secret_name
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

#: /proc/1/cgroup, /proc/self/limits, os-release: a few KB; under another root, anything
MAX_SYSTEM_FILE = 1 << 20
#: Markers of a container runtime in /proc/1/cgroup, most specific first.
_CGROUP_MARKERS = (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"), ("containerd", "containerd"))


class EnvironmentProbe:
    name = "environment"

    def applies(self, ctx: ProbeContext) -> bool:
        return True

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        env = {name: value for name, value in ctx.env.items() if not is_secret_name(name)}
        collect_env(facts, env)
        collect_container(facts, ctx, env)
        collect_system(facts, ctx)
        return facts


def collect_env(facts: Facts, env: Mapping[str, str]) -> None:
    facts.set("env.cuda_visible_devices", env.get("CUDA_VISIBLE_DEVICES"))
    facts.set("env.cuda_device_order", env.get("CUDA_DEVICE_ORDER"))
    facts.set("env.nvidia_visible_devices", env.get("NVIDIA_VISIBLE_DEVICES"))
    facts.set("env.ld_library_path", env.get("LD_LIBRARY_PATH"))
    facts.set("env.cuda_home", env.get("CUDA_HOME", env.get("CUDA_PATH")))  # torch.utils.cpp_extension's order
    facts.set("env.nccl", {k: v for k, v in sorted(env.items()) if k.startswith("NCCL_")})


def collect_container(facts: Facts, ctx: ProbeContext, env: Mapping[str, str]) -> None:
    cgroup_runtime = _cgroup_runtime(facts, ctx)
    markers = [
        ("KUBERNETES_SERVICE_HOST" in env, "KUBERNETES_SERVICE_HOST is set", "kubernetes"),
        (ctx.file("/run/.containerenv").exists(), "/run/.containerenv exists", "podman"),
        (ctx.file("/.dockerenv").exists(), "/.dockerenv exists", "docker"),
        (cgroup_runtime is not None, f"/proc/1/cgroup names {cgroup_runtime}", str(cgroup_runtime)),
    ]
    evidence = [why for found, why, _ in markers if found]
    runtimes = [runtime for found, _, runtime in markers if found]
    facts.set("container.detected", bool(runtimes))
    facts.set("container.runtime", runtimes[0] if runtimes else None)
    facts.set("container.evidence", evidence)
    # Variables that nvidia/cuda images set; they describe the image even when read outside one.
    facts.set("container.cuda_version", env.get("CUDA_VERSION"))
    facts.set("container.nvidia_require_cuda", env.get("NVIDIA_REQUIRE_CUDA"))
    facts.set("container.nvidia_disable_require", _disable_require(env.get("NVIDIA_DISABLE_REQUIRE")))
    facts.set("container.nvidiactl", device_access(ctx.file("/dev/nvidiactl")))


def device_access(path: Path) -> str:
    """ "ok", "missing", or why the NVIDIA control device cannot be opened: a container whose
    device cgroup lost the GPUs (after ``systemctl daemon-reload``) has the file but may not open it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    return "ok"


def _disable_require(value: str | None) -> bool:
    if value is None:
        return False
    # read as the container toolkit reads it; imported only when set (not on every fast check)
    from cuda_doctor.container.require import parse_bool

    return parse_bool(value)


def _cgroup_runtime(facts: Facts, ctx: ProbeContext) -> str | None:
    """The runtime named in PID 1's cgroup paths (cgroup v2 with a private namespace names none)."""
    try:
        text = read_text(ctx.file("/proc/1/cgroup"), MAX_SYSTEM_FILE)
    except OSError as exc:
        # Absent off Linux and hidden in some sandboxes; the other markers still count.
        facts.mark_unknown("container.cgroup_runtime", f"cannot read /proc/1/cgroup: {exc.strerror or exc}")
        return None
    runtime = next((name for marker, name in _CGROUP_MARKERS if marker in text), None)
    facts.set("container.cgroup_runtime", runtime)
    return runtime


def collect_system(facts: Facts, ctx: ProbeContext) -> None:
    try:
        stat = os.statvfs(ctx.file("/dev/shm"))
        facts.set("system.shm_bytes", stat.f_blocks * stat.f_frsize)
    except OSError as exc:
        facts.mark_unknown("system.shm_bytes", f"cannot stat /dev/shm: {exc.strerror or exc}")
    try:
        text = read_text(ctx.file("/proc/self/limits"), MAX_SYSTEM_FILE)
    except OSError as exc:
        facts.mark_unknown("system.memlock_bytes", f"cannot read /proc/self/limits: {exc.strerror or exc}")
    else:
        found, value = parse_memlock(text)
        if found:
            facts.set("system.memlock_bytes", value)
        else:
            facts.mark_unknown("system.memlock_bytes", "no 'Max locked memory' row in /proc/self/limits")
    facts.set("system.is_root", os.geteuid() == 0)
    facts.set("system.hostname", os.uname().nodename)
    release = os_release(ctx)
    facts.set("system.os", release.get("PRETTY_NAME") or f"{platform.system()} {platform.release()}".strip())
    facts.set("system.os_family", os_family(release))
    facts.set("system.kernel", platform.release())
    facts.set("system.machine", platform.machine())


_LIMIT_ROW = re.compile(r"^Max locked memory\s+(?P<soft>\S+)\s+(?P<hard>\S+)", re.MULTILINE)


def parse_memlock(text: str) -> tuple[bool, int | None]:
    """The soft ``Max locked memory`` limit in bytes; ``None`` means unlimited."""
    match = _LIMIT_ROW.search(text)
    if match is None:
        return False, None
    soft = match.group("soft")
    if soft == "unlimited":
        return True, None
    try:
        return True, int(soft)
    except ValueError:
        return False, None


def os_release(ctx: ProbeContext) -> dict[str, str]:
    """The fields of os-release (``PRETTY_NAME``, ``ID``, ``ID_LIKE``, ``VERSION_ID``)."""
    for candidate in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = read_text(ctx.file(candidate), MAX_SYSTEM_FILE)
        except OSError:
            continue  # the next candidate, then platform, answer instead
        pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
        return {key.strip(): value.strip().strip('"') for key, value in pairs}
    return {}


#: The package family of a distribution, by its os-release ID or ID_LIKE words.
OS_FAMILIES = {"debian": "debian", "ubuntu": "debian", "rhel": "rhel", "fedora": "rhel", "centos": "rhel",
               "rocky": "rhel", "almalinux": "rhel", "amzn": "rhel", "sles": "suse", "opensuse": "suse"}  # fmt: skip


def os_name(ctx: ProbeContext) -> str:
    """``PRETTY_NAME`` from os-release (what users recognise), else the platform string."""
    return os_release(ctx).get("PRETTY_NAME") or f"{platform.system()} {platform.release()}".strip()


def os_family(release: dict[str, str]) -> str | None:
    """ "debian", "rhel" or "suse": which package manager's names a fix can use; None: other."""
    words = [release.get("ID", ""), *release.get("ID_LIKE", "").split()]
    return next((OS_FAMILIES[word] for word in words if word in OS_FAMILIES), None)


PROBE = EnvironmentProbe()

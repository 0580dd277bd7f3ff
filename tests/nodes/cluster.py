"""A real cluster of Slurm nodes on this machine: each node a network namespace of its own with
its own host name (a UTS namespace), its own /etc/hosts (a mount namespace), a veth on one
bridge with an address the test assigns, and its own slurmd; one slurmctld and one munged on the
host.  Traffic stays on the test's bridge: 10.213.<subnet>.0/24, its addresses assigned here.

``NamespaceCluster.start`` builds it and ``stop`` removes every daemon, namespace, veth and bridge
it made, also after a failure half-way; every command is time-bounded."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

COMMANDS = ("ip", "unshare", "munged", "slurmctld", "slurmd", "srun", "scontrol", "sinfo", "iptables")
#: Seconds the cluster has to come up (slurmd registering with slurmctld).
START_WAIT = 60.0


class ClusterError(Exception):
    """The cluster could not be built here; the message says why (the tests skip with it)."""


def missing_requirements() -> str | None:
    """Why no cluster can be built on this machine, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, slurmd)"
    absent = [cmd for cmd in COMMANDS if shutil.which(cmd) is None]
    if absent:
        return f"not installed: {', '.join(absent)}"
    return None


def _run(argv: Sequence[str], timeout: float = 15, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise ClusterError(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-400:]}")
    return done


def _free_port_pair() -> int:
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
        with socket.socket() as second:
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise ClusterError("no two consecutive free ports")


@dataclass
class Node:
    name: str  # its host name and Slurm node name
    netns: str
    veth: str  # the host's end on the bridge; the namespace's end is ``interface``
    address: str
    interface: str = "eth0"


@dataclass
class NamespaceCluster:
    folder: Path
    count: int = 3
    tag: str = field(default_factory=lambda: f"{os.getpid() % 10000:04d}")
    subnet: int = field(default_factory=lambda: 100 + os.getpid() % 150)
    nodes: list[Node] = field(default_factory=list)
    port: int = 0
    _made_links: list[str] = field(default_factory=list)
    _made_netns: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"cdnbr{self.tag}"

    @property
    def gateway(self) -> str:
        return f"10.213.{self.subnet}.254"

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    # -- building -----------------------------------------------------------------------------

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.nodes = [
            Node(f"cdn{self.tag}n{i}", f"cdn{self.tag}-n{i}", f"cdn{self.tag}v{i}", f"10.213.{self.subnet}.{i}")
            for i in range(1, self.count + 1)
        ]
        self._network()
        self._munge()
        self._slurm()

    def _network(self) -> None:
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        self._made_links.append(self.bridge)
        _run(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for node in self.nodes:
            _run(["ip", "netns", "add", node.netns])
            self._made_netns.append(node.netns)
            _run(["ip", "link", "add", node.veth, "type", "veth", "peer", "name", node.interface, "netns", node.netns])
            self._made_links.append(node.veth)
            _run(["ip", "link", "set", node.veth, "master", self.bridge, "up"])
            inside = ["ip", "netns", "exec", node.netns]
            _run([*inside, "ip", "addr", "add", f"{node.address}/24", "dev", node.interface])
            _run([*inside, "ip", "link", "set", node.interface, "up"])
            _run([*inside, "ip", "link", "set", "lo", "up"])
        hosts = ["127.0.0.1 localhost", f"{self.gateway} {socket.gethostname()}"]
        hosts += [f"{node.address} {node.name}" for node in self.nodes]
        (self.folder / "hosts").write_text("\n".join(hosts) + "\n", encoding="utf-8")

    def _munge(self) -> None:
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        (self.folder / "munge").mkdir(mode=0o700, exist_ok=True)
        _run([
            "munged", "--force", f"--key-file={key}", f"--socket={self.folder / 'munge' / 'socket'}",
            f"--pid-file={self.folder / 'munged.pid'}", f"--log-file={self.folder / 'munged.log'}",
            f"--seed-file={self.folder / 'munge' / 'seed'}",
        ])  # fmt: skip

    def _slurm(self) -> None:
        self.port = _free_port_pair()
        host = socket.gethostname().split(".")[0]
        folder = self.folder
        (folder / "state").mkdir(exist_ok=True)
        for node in self.nodes:
            (folder / "spool" / node.name).mkdir(parents=True, exist_ok=True)
        names = ",".join(node.name for node in self.nodes)
        lines = [
            "# a cluster of network namespaces for cuda-doctor's nodes-marked tests",
            f"ClusterName=cdnodes{self.tag}",
            f"SlurmctldHost={host}({self.gateway})",
            f"SlurmctldPort={self.port}",
            f"SlurmdPort={self.port + 1}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={folder / 'munge' / 'socket'}",
            "CredType=cred/munge",
            f"StateSaveLocation={folder / 'state'}",
            f"SlurmdSpoolDir={folder / 'spool'}/%n",
            f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
            f"SlurmdPidFile={folder}/slurmd-%n.pid",
            f"SlurmctldLogFile={folder / 'slurmctld.log'}",
            f"SlurmdLogFile={folder}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides",
            "MpiDefault=none",
            "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "MessageTimeout=10",
            "InactiveLimit=0",
            "KillWait=2",
            "MinJobAge=10",
            *(f"NodeName={node.name} NodeAddr={node.address} CPUs=4 State=UNKNOWN" for node in self.nodes),
            f"PartitionName=nodes Nodes={names} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
        _run(["slurmctld", "-c", "-f", str(self.conf)], timeout=30)
        for node in self.nodes:
            # its own host name and /etc/hosts (which names every node), then slurmd in the background
            # `ip netns exec` mounts a sysfs of the namespace's own, without the host's cgroup folders
            # that slurmd's cgroup plugin reads: they are mounted again as the host has them
            script = (
                cgroup_mounts() + " && "
                f"mount --bind {folder / 'hosts'} /etc/hosts && hostname {node.name} && "
                f"exec slurmd -N {node.name} -f {self.conf}"
            )
            _run(["ip", "netns", "exec", node.netns, "unshare", "--uts", "--mount", "sh", "-c", script], timeout=30)
        self._wait_up()

    def _wait_up(self) -> None:
        deadline = time.monotonic() + START_WAIT
        last = ""
        while time.monotonic() < deadline:
            done = subprocess.run(
                ["sinfo", "--noheader", "--Node", "--format=%N %T"],
                capture_output=True, text=True, env=self.env(), timeout=10, check=False,
            )  # fmt: skip
            last = (done.stdout + done.stderr).strip()
            states = dict(line.split()[:2] for line in done.stdout.splitlines() if len(line.split()) >= 2)
            if len(states) == self.count and all(s.rstrip("*~#!%$@^-") == "idle" for s in states.values()):
                return
            time.sleep(0.5)
        logs = "; ".join(self._tail(p) for p in sorted(self.folder.glob("*.log")))
        raise ClusterError(f"the nodes did not come up in {START_WAIT:g} s: {last!r}; logs: {logs}")

    def _tail(self, path: Path) -> str:
        with contextlib.suppress(OSError):
            return f"{path.name}: " + " | ".join(path.read_text(errors="replace").splitlines()[-3:])
        return path.name

    # -- using -------------------------------------------------------------------------------

    def inside(self, node: Node, *argv: str, timeout: float = 15) -> subprocess.CompletedProcess[str]:
        return _run(["ip", "netns", "exec", node.netns, *argv], timeout=timeout)

    def srun(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["srun", *argv], capture_output=True, text=True, env=self.env(), timeout=timeout, check=False
        )

    # -- removing ----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every daemon and remove every namespace, veth and bridge made; never raises."""
        pids = [self.folder / f"slurmd-{node.name}.pid" for node in self.nodes]
        pids += [self.folder / "slurmctld.pid", self.folder / "munged.pid"]
        for pid_file in pids:
            _stop_pid_file(pid_file)
        for netns in reversed(self._made_netns):
            _kill_in_netns(netns)
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _run(["ip", "netns", "del", netns], check=False)
        for link in reversed(self._made_links):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _run(["ip", "link", "del", link], check=False)
        self._made_netns.clear()
        self._made_links.clear()


_GENERIC_MOUNT_OPTIONS = ("rw", "ro", "relatime", "nosuid", "nodev", "noexec")


def cgroup_mounts(mounts: Path = Path("/proc/self/mounts")) -> str:
    """Shell commands that mount the cgroup file systems under /sys/fs/cgroup as this host has them."""
    commands = []
    for line in mounts.read_text().splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[1].startswith("/sys/fs/cgroup"):
            continue
        _source, target, fstype, opts = parts[:4]
        if fstype == "tmpfs":
            commands.append(f"mount -t tmpfs -o mode=755 tmpfs {target}")
        elif fstype == "cgroup":
            wanted = ",".join(o for o in opts.split(",") if o not in _GENERIC_MOUNT_OPTIONS)
            commands.append(f"mkdir -p {target} && mount -t cgroup -o {wanted} cgroup {target}")
        elif fstype == "cgroup2":
            commands.append(f"mkdir -p {target} && mount -t cgroup2 none {target}")
    return " && ".join(commands) or "true"


def _stop_pid_file(path: Path) -> None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def _kill_in_netns(netns: str) -> None:
    """Every process still in the namespace (a task slurmd left behind), by its pid."""
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        done = _run(["ip", "netns", "pids", netns], check=False)
        for word in done.stdout.split():
            with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                os.kill(int(word), signal.SIGKILL)

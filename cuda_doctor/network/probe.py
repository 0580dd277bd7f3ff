"""This node's network facts, read from sysfs, procfs and /dev under ``ctx.root`` (no root
privileges, no subprocess): the interfaces with their state, MTU and addresses; the RDMA
(InfiniBand, RoCE, EFA) devices and ports; whether GPUDirect RDMA's peer-memory module is
loaded; the NCCL network plugins on the library path; the PCI place of every NIC and GPU; and
the variables that steer NCCL's and Gloo's choice of network.  docs/network.md lists every fact.

IPv4 addresses are not in any file: they come from the kernel of the machine we run on (one
``SIOCGIFCONF`` ioctl), so under another root they are unknown unless a reader is given.
"""

from __future__ import annotations

import array
import fcntl
import os
import re
import socket
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cuda_doctor.base.reading import read_text
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

#: The most entries looked at in one folder: a node has tens of interfaces, a few hundred PCI functions.
MAX_ENTRIES = 4096
#: A sysfs attribute or a line of /proc is short; a recorded tree may hold anything.
SMALL_FILE = 4096
#: /proc/net/if_inet6 holds one line per IPv6 address.
IF_INET6_CAP = 1 << 20
#: /etc/nccl.conf and ~/.nccl.conf hold a few lines.
NCCL_CONF_CAP = 64 * 1024
#: ld.so configuration files and the folders they name.
LD_CONF_CAP = 64 * 1024
MAX_LIBRARY_DIRS = 128
MAX_LIBRARY_ENTRIES = 100_000
#: The interface's ``type`` (include/uapi/linux/if_arp.h).
ARP_TYPES = {1: "ethernet", 32: "infiniband", 772: "loopback", 776: "sit", 65534: "none"}
IFF_UP = 0x1
#: NCCL and Gloo read these; each is recorded as it is set (None: unset).
VARIABLES = {
    "nccl_socket_ifname": "NCCL_SOCKET_IFNAME",
    "nccl_socket_family": "NCCL_SOCKET_FAMILY",
    "nccl_comm_id": "NCCL_COMM_ID",
    "nccl_ib_hca": "NCCL_IB_HCA",
    "nccl_ib_disable": "NCCL_IB_DISABLE",
    "nccl_net": "NCCL_NET",
    "nccl_net_plugin": "NCCL_NET_PLUGIN",
    "nccl_net_gdr_level": "NCCL_NET_GDR_LEVEL",
    "nccl_dmabuf_enable": "NCCL_DMABUF_ENABLE",
    "gloo_socket_ifname": "GLOO_SOCKET_IFNAME",
}
#: What NCCL's net_ib/gdr.cc checks to decide that a peer-memory module is loaded.
PEERMEM_FILES = (
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
)
#: Where the dynamic loader looks when neither LD_LIBRARY_PATH nor ld.so.cache names a folder.
DEFAULT_LIBRARY_DIRS = (
    "/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
)  # fmt: skip
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_PCI_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_PLUGIN = re.compile(r"^libnccl-net.*\.so(\.\d+)*$")
NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")
SIOCGIFCONF = 0x8912
#: The most IPv4 addresses asked of the kernel at once.
MAX_IPV4 = 1024

Ipv4Reader = Callable[[], dict[str, list[str]]]


def read_value(path: Path) -> str | None:
    """A sysfs attribute's text, stripped; None when it cannot be read (absent, or EINVAL as
    ``speed`` gives for a link that is down)."""
    try:
        return read_text(path, SMALL_FILE, "a sysfs attribute").strip()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    text = read_value(path)
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def listing(path: Path) -> list[str]:
    """The names in a folder, sorted, at most ``MAX_ENTRIES``; [] when it is not there."""
    try:
        return sorted(os.listdir(path))[:MAX_ENTRIES]
    except OSError:
        return []


def pci_place(link: Path) -> dict[str, Any]:
    """Where the PCI device behind a sysfs ``device`` link sits: its address, the chain from its
    host bridge down (``["pci0000:00", "0000:00:01.0", "0000:01:00.0", …]``, the device last),
    and its NUMA node (None: none, or not a PCI device)."""
    if not os.path.lexists(link):
        return {"pci": None, "pci_path": [], "numa_node": None}
    parts = os.path.realpath(link).split(os.sep)
    chain = [part for part in parts if _BDF.match(part) or _PCI_ROOT.match(part)]
    address = chain[-1] if chain and _BDF.match(chain[-1]) else None
    numa = read_int(link / "numa_node") if address else None
    return {
        "pci": address,
        "pci_path": chain if address else [],
        "numa_node": numa if numa is not None and numa >= 0 else None,
    }


def driver_name(device: Path) -> str | None:
    driver = device / "driver"
    return os.path.basename(os.readlink(driver)) if os.path.islink(driver) else None


def ipv6_addresses(root: Path) -> dict[str, list[str]]:
    """IPv6 addresses by interface, from /proc/net/if_inet6 (``OSError`` when it cannot be read;
    a kernel without IPv6 has no such file, which the caller takes as none)."""
    text = read_text(root / "proc/net/if_inet6", IF_INET6_CAP, "/proc/net/if_inet6")
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or len(fields[0]) != 32:
            continue
        try:
            address = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(fields[0]))
        except ValueError:  # a line that is not the kernel's hex address: not an address
            continue
        found.setdefault(fields[5], []).append(address)
    return found


def kernel_ipv4_addresses() -> dict[str, list[str]]:
    """IPv4 addresses by interface from this machine's kernel: one ``SIOCGIFCONF`` ioctl on a
    datagram socket (no privileges; an alias label ``eth0:1`` counts for ``eth0``)."""
    record = 40 if struct.calcsize("P") == 8 else 32  # struct ifreq: a 16-byte name and a union
    buffer = array.array("B", bytes(MAX_IPV4 * record))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("iP", len(buffer), buffer.buffer_info()[0])
        answer = fcntl.ioctl(sock.fileno(), SIOCGIFCONF, request)
    length = struct.unpack("iP", answer)[0]
    data = buffer.tobytes()[:length]
    found: dict[str, list[str]] = {}
    for start in range(0, length - record + 1, record):
        name = data[start : start + 16].split(b"\0", 1)[0].decode("ascii", "replace").split(":", 1)[0]
        address = socket.inet_ntoa(data[start + 20 : start + 24])  # sockaddr_in: family, port, address
        found.setdefault(name, []).append(address)
    return found


def interfaces(root: Path, ipv4: Mapping[str, list[str]] | None, ipv6: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    """Every network interface in /sys/class/net with what NCCL and Gloo look at: whether it is
    up and running (NCCL takes only interfaces with ``IFF_RUNNING``: administratively up with an
    operational state of up or unknown, as the kernel's ``dev_get_flags`` says), its addresses
    (``ipv4`` None: not known), MTU, link speed, kind and PCI place."""
    found = []
    base = root / "sys/class/net"
    for name in listing(base):
        folder = base / name
        flags = read_int(folder / "flags")
        operstate = read_value(folder / "operstate")
        up = bool(flags & IFF_UP) if flags is not None else operstate in ("up", "unknown")
        kind = read_int(folder / "type")
        speed = read_int(folder / "speed")
        entry: dict[str, Any] = {
            "name": name,
            "index": read_int(folder / "ifindex"),
            "kind": ARP_TYPES.get(kind, str(kind)) if kind is not None else None,
            "operstate": operstate,
            "up": up,
            "running": up and operstate in ("up", "unknown"),
            "mtu": read_int(folder / "mtu"),
            "speed_mbps": speed if speed is not None and speed > 0 else None,
            "ipv4": list(ipv4.get(name, [])) if ipv4 is not None else None,
            "ipv6": list(ipv6.get(name, [])),
            "driver": driver_name(folder / "device") if os.path.isdir(folder / "device") else None,
        }
        entry.update(pci_place(folder / "device"))
        found.append(entry)
    return found


def rdma_devices(root: Path) -> list[dict[str, Any]]:
    """The RDMA devices in /sys/class/infiniband (InfiniBand, RoCE, EFA) with each port's state,
    physical state, rate and link layer as the kernel words them ("4: ACTIVE", "5: LinkUp",
    "400 Gb/sec (4X NDR)", "InfiniBand")."""
    found = []
    base = root / "sys/class/infiniband"
    for name in listing(base):
        folder = base / name
        ports = []
        for port in listing(folder / "ports"):
            if not port.isdigit():
                continue
            where = folder / "ports" / port
            ports.append({
                "port": int(port),
                "state": read_value(where / "state"),
                "phys_state": read_value(where / "phys_state"),
                "rate": read_value(where / "rate"),
                "link_layer": read_value(where / "link_layer"),
            })  # fmt: skip
        driver = driver_name(folder / "device") if os.path.isdir(folder / "device") else None
        entry: dict[str, Any] = {
            "name": name,
            "driver": driver,
            "efa": driver == "efa" or name.startswith("efa"),
            "ports": sorted(ports, key=lambda p: p["port"]),
        }
        entry.update(pci_place(folder / "device"))
        found.append(entry)
    return found


def gpu_places(root: Path) -> list[dict[str, Any]]:
    """The NVIDIA GPUs on the PCI bus with their place, to meet ``gpu[i].pci_bus_id``."""
    found = []
    base = root / "sys/bus/pci/devices"
    for name in listing(base):
        device = base / name
        if read_value(device / "vendor") != NVIDIA_VENDOR:
            continue
        if not (read_value(device / "class") or "").startswith(GPU_CLASSES):
            continue
        found.append(pci_place(device))
    return found


def library_dirs(root: Path, env: Mapping[str, str]) -> list[str]:
    """The folders the dynamic loader searches, in its order: LD_LIBRARY_PATH, those ld.so.conf
    (and the files it includes) names, then the default ones."""
    dirs = [part for part in env.get("LD_LIBRARY_PATH", "").split(":") if part]
    dirs += _ld_conf_dirs(root, "/etc/ld.so.conf", depth=0)
    dirs += DEFAULT_LIBRARY_DIRS
    unique: list[str] = []
    for folder in dirs:
        if folder not in unique:
            unique.append(folder)
    return unique[:MAX_LIBRARY_DIRS]


def _ld_conf_dirs(root: Path, conf: str, depth: int) -> list[str]:
    try:
        text = read_text(root / conf.lstrip("/"), LD_CONF_CAP, "an ld.so configuration file")
    except OSError:
        return []
    dirs: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("include") and depth < 2:
            pattern = line.split(None, 1)[1] if len(line.split(None, 1)) == 2 else ""
            folder, _, glob = pattern.rpartition("/")
            folder = folder if folder.startswith("/") else f"{os.path.dirname(conf)}/{folder}"  # relative to the file
            for name in listing(root / folder.lstrip("/")):
                if Path(name).match(glob or "*"):
                    dirs += _ld_conf_dirs(root, f"{folder}/{name}", depth + 1)
        elif line.startswith("/"):
            dirs.append(line)
    return dirs


def net_plugins(root: Path, dirs: list[str]) -> list[str]:
    """Every ``libnccl-net*.so`` in those folders, as absolute paths of the inspected system
    (a library folder may hold thousands of files: each is scanned up to ``MAX_LIBRARY_ENTRIES``)."""
    found = []
    for folder in dirs:
        try:
            with os.scandir(root / folder.lstrip("/")) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_LIBRARY_ENTRIES:
                        break
                    if _PLUGIN.match(entry.name):
                        found.append(f"{folder.rstrip('/')}/{entry.name}")
        except OSError:
            continue  # a folder on the path that is not there
    return sorted(found)


def nccl_conf_files(env: Mapping[str, str]) -> list[str]:
    """The files NCCL reads variables from (src/misc/param.cc), the first winning after the
    environment: NCCL_CONF_FILE, else ~/.nccl.conf; then /etc/nccl.conf."""
    user = env.get("NCCL_CONF_FILE") or (f"{env['HOME']}/.nccl.conf" if env.get("HOME") else None)
    return [path for path in (user, "/etc/nccl.conf") if path]


def parse_nccl_conf(text: str) -> dict[str, str]:
    """``NAME=value`` lines as NCCL reads them: ``#`` starts a comment line, nothing is trimmed
    but the line end, the first assignment of a name wins."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        found.setdefault(name[:1023], value[:1023])
    return found


def nccl_settings(root: Path, env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The variables NCCL will see, where each came from ("environment" or a file), and the
    configuration files that were read: the environment wins, then the files in order."""
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    read: list[str] = []
    for path in nccl_conf_files(env):
        try:
            text = read_text(root / path.lstrip("/"), NCCL_CONF_CAP, "an NCCL configuration file")
        except OSError:
            continue  # most nodes have neither file
        read.append(path)
        for name, value in parse_nccl_conf(text).items():
            if name.startswith("NCCL_") and name not in values:
                values[name], sources[name] = value, path
    for name, value in env.items():
        if name.startswith("NCCL_"):
            values[name], sources[name] = value, "environment"
    return values, sources, read


class NetworkProbe:
    name = "network"

    def __init__(self, ipv4_reader: Ipv4Reader | None = None) -> None:
        #: None: this machine's kernel when the root is "/", unknown under another root.
        self.ipv4_reader = ipv4_reader

    def applies(self, ctx: ProbeContext) -> bool:
        return True

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        root = ctx.root
        nccl, sources, conf_files = nccl_settings(root, ctx.env)
        for fact, variable in VARIABLES.items():
            facts.set(f"net.{fact}", nccl.get(variable) if variable.startswith("NCCL_") else ctx.env.get(variable))
        facts.set("net.nccl_conf_files", conf_files)
        facts.set(
            "net.nccl_from_files",
            {k: v for k, v in sorted(sources.items()) if k in VARIABLES.values() and v != "environment"},
        )
        facts.set("net.slurm_job", "SLURM_JOB_ID" in ctx.env)
        ipv4 = self._ipv4(ctx, facts)
        try:
            ipv6 = ipv6_addresses(root)
        except FileNotFoundError:
            ipv6 = {}  # a kernel without IPv6
        except OSError as exc:
            ipv6 = {}
            facts.mark_unknown("net.ipv6_read", f"/proc/net/if_inet6 could not be read: {exc.strerror or exc}")
        else:
            facts.set("net.ipv6_read", True)
        if not os.path.isdir(root / "sys/class/net"):
            facts.mark_unknown("net.interfaces", "/sys/class/net is not there (no sysfs mounted)")
        else:
            facts.set("net.interfaces", interfaces(root, ipv4, ipv6))
        devices = rdma_devices(root)
        facts.set("net.rdma_devices", devices)
        facts.set("net.rdma_device_count", len(devices))
        facts.set("net.uverbs", [name for name in listing(root / "dev/infiniband") if name.startswith("uverbs")])
        facts.set("net.peermem", next((path for path in PEERMEM_FILES if (root / path.lstrip("/")).exists()), None))
        facts.set("net.efa_module_loaded", (root / "sys/module/efa").is_dir())
        dirs = library_dirs(root, ctx.env)
        facts.set("net.library_dirs", dirs)
        facts.set("net.nccl_net_plugins", net_plugins(root, dirs))
        facts.set("net.gpu_pci", gpu_places(root))
        return facts

    def _ipv4(self, ctx: ProbeContext, facts: Facts) -> dict[str, list[str]] | None:
        reader = self.ipv4_reader
        if reader is None and ctx.root != Path("/"):
            facts.mark_unknown("net.ipv4_read", f"IPv4 addresses come from the running kernel, not from {ctx.root}")
            return None
        try:
            found = (reader or kernel_ipv4_addresses)()
        except OSError as exc:
            facts.mark_unknown("net.ipv4_read", f"the kernel did not list the IPv4 addresses: {exc.strerror or exc}")
            return None
        facts.set("net.ipv4_read", True)
        return found


PROBE = NetworkProbe()

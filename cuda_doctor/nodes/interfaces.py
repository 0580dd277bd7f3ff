"""This node's network interfaces as the job's sockets see them: IPv4 addresses by interface,
NCCL's and Gloo's interface variables matched against them, and the address a job would use."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_doctor.network.derive import MAX_SOCKET_ENTRIES, parse_spec, selects
from cuda_doctor.network.probe import interfaces as interface_entries
from cuda_doctor.network.probe import kernel_ipv4_addresses

#: The variables that pick the interface a job's sockets use, in the order they are judged.
IFNAME_VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


@dataclass(frozen=True)
class Interface:
    name: str
    address: str | None  # IPv4, None when it has none
    state: str | None  # /sys/class/net/<name>/operstate: up, down, unknown (loopback, veth before carrier)
    speed_mbps: int | None  # /sys/class/net/<name>/speed; None where the driver does not say


def interfaces(root: Path = Path("/")) -> list[Interface]:
    """Every interface of this network namespace with its first IPv4 address (no root needed),
    read as the network probe reads them."""
    try:
        ipv4 = kernel_ipv4_addresses()
    except OSError:  # no socket to ask with: the interfaces without their addresses
        ipv4 = {}
    return [
        Interface(entry["name"], next(iter(entry["ipv4"] or []), None), entry["operstate"], entry["speed_mbps"])
        for entry in interface_entries(root, ipv4, {})
    ]


def nccl_matches(spec: str, names: Sequence[str]) -> list[str]:
    """The interfaces NCCL_SOCKET_IFNAME selects, as NCCL parses the list (``network.derive``)."""
    parsed = parse_spec(spec.strip(), MAX_SOCKET_ENTRIES)
    return [name for name in names if selects(parsed, name)]


def gloo_matches(spec: str, names: Sequence[str]) -> list[str]:
    """The interfaces GLOO_SOCKET_IFNAME names: exact names, comma-separated (torch.distributed)."""
    wanted = [part.strip() for part in spec.split(",") if part.strip()]
    return [name for name in wanted if name in names]


@dataclass(frozen=True)
class JobAddress:
    address: str | None  # the IPv4 address this node's job sockets use; None when none can be told
    interface: str | None
    chosen_by: str  # "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME" or "route to rank 0"
    problems: tuple[str, ...]  # a variable that names no interface here, in words


def job_address(env: Mapping[str, str], backend: str, master: str, found: Sequence[Interface]) -> JobAddress:
    """The interface and address the job will use: the one the backend's variable selects, else
    the one the route to rank 0 leaves by; with every interface variable that selects nothing here."""
    names = [i.name for i in found]
    with_address = {i.name: i.address for i in found if i.address}
    problems: list[str] = []
    chosen: tuple[str, str] | None = None
    for variable in IFNAME_VARIABLES:
        spec = env.get(variable, "").strip()
        if not spec:
            continue
        matches = nccl_matches(spec, names) if variable.startswith("NCCL") else gloo_matches(spec, names)
        usable = [name for name in matches if name in with_address]
        if not usable:
            have = ", ".join(f"{i.name} {i.address}" if i.address else i.name for i in found) or "none"
            what = "selects no interface" if not matches else "selects only interfaces without an IPv4 address"
            problems.append(f"{variable}={spec} {what} here (interfaces: {have})")
            continue
        uses_it = variable.startswith("GLOO") == (backend == "gloo")
        if chosen is None or uses_it:
            chosen = (usable[0], variable)
    if chosen is not None:
        name, variable = chosen
        return JobAddress(with_address[name], name, variable, tuple(problems))
    address = route_source(master)
    interface = next((i.name for i in found if address and i.address == address), None)
    return JobAddress(address, interface, "route to rank 0", tuple(problems))


def route_source(host: str, port: int = 9) -> str | None:
    """The local address the kernel picks to reach ``host``: a UDP socket's connect sends nothing."""
    try:
        target = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)[0][4]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(target)
            return str(sock.getsockname()[0])
    except (OSError, IndexError, UnicodeError):
        return None

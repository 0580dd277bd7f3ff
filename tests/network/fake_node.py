"""A fake node under a folder: sysfs, procfs and /dev trees as the kernel lays them out, and the
network probe pointed at it (the IPv4 addresses given, since no file holds them)."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.network.probe import NetworkProbe

#: A switch under root port 0000:16:02.0 with a GPU and an HCA on two of its downstream ports.
SWITCH = ["pci0000:16", "0000:16:02.0", "0000:17:00.0"]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def pci_device(root: Path, chain: list[str], **attributes: str) -> Path:
    """A PCI function at /sys/devices/<chain>, with its attributes and /sys/bus/pci/devices link."""
    device = root / "sys/devices" / Path(*chain)
    device.mkdir(parents=True, exist_ok=True)
    for name, value in attributes.items():
        write(device / name, value + "\n")
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True, exist_ok=True)
    (bus / chain[-1]).symlink_to(os.path.relpath(device, bus))
    return device


def bind_driver(root: Path, device: Path, driver: str) -> None:
    folder = root / "sys/bus/pci/drivers" / driver
    folder.mkdir(parents=True, exist_ok=True)
    (device / "driver").symlink_to(os.path.relpath(folder, device))


def interface(
    root: Path, name: str, *, index: int, operstate: str, flags: int, kind: int = 1, mtu: int = 1500,
    device: Path | None = None,
) -> None:  # fmt: skip
    folder = root / "sys/class/net" / name
    for attribute, value in (("ifindex", index), ("operstate", operstate), ("flags", hex(flags)),
                             ("type", kind), ("mtu", mtu)):  # fmt: skip
        write(folder / attribute, f"{value}\n")
    if device is not None:
        (folder / "device").symlink_to(os.path.relpath(device, folder))


def rdma_device(root: Path, name: str, device: Path, ports: dict[int, tuple[str, str, str]]) -> None:
    folder = root / "sys/class/infiniband" / name
    folder.mkdir(parents=True)
    (folder / "device").symlink_to(os.path.relpath(device, folder))
    for port, (state, phys_state, link_layer) in ports.items():
        where = folder / "ports" / str(port)
        write(where / "state", state + "\n")
        write(where / "phys_state", phys_state + "\n")
        write(where / "rate", "400 Gb/sec (4X NDR)\n")
        write(where / "link_layer", link_layer + "\n")


def basic_node(root: Path) -> None:
    """lo and eth0 up, eth1 down; no RDMA device."""
    interface(root, "lo", index=1, operstate="unknown", flags=0x9, kind=772, mtu=65536)
    nic = pci_device(root, ["pci0000:00", "0000:00:03.0"], vendor="0x1af4", **{"class": "0x020000"}, numa_node="-1")
    bind_driver(root, nic, "virtio-pci")
    interface(root, "eth0", index=2, operstate="up", flags=0x1003, device=nic)
    interface(root, "eth1", index=3, operstate="down", flags=0x1002)
    write(
        root / "proc/net/if_inet6",
        "00000000000000000000000000000001 01 80 10 80       lo\n"
        "fd000000000000000000000000000002 02 40 00 80     eth0\n",
    )


def collect(root: Path, env: dict[str, str] | None = None, ipv4: dict[str, list[str]] | None = None) -> Facts:
    probe = NetworkProbe(ipv4_reader=lambda: ipv4 if ipv4 is not None else {"lo": ["127.0.0.1"], "eth0": ["10.0.0.5"]})
    return probe.collect(ProbeContext(root=root, env=env or {}))


def hgx_node(root: Path, *, port_state: str = "4: ACTIVE", uverbs: bool = True) -> None:
    """A GPU and a ConnectX HCA under one PCIe switch, an IPoIB interface, lo and eth0."""
    basic_node(root)
    gpu = pci_device(root, [*SWITCH, "0000:18:00.0", "0000:19:00.0"], vendor="0x10de", **{"class": "0x030200"},
                     numa_node="0")  # fmt: skip
    bind_driver(root, gpu, "nvidia")
    hca = pci_device(root, [*SWITCH, "0000:18:10.0", "0000:1a:00.0"], vendor="0x15b3", **{"class": "0x020700"},
                     numa_node="0")  # fmt: skip
    bind_driver(root, hca, "mlx5_core")
    rdma_device(root, "mlx5_0", hca, {1: (port_state, "5: LinkUp", "InfiniBand")})
    interface(root, "ib0", index=5, operstate="up", flags=0x1003, kind=32, mtu=2044, device=hca)
    if uverbs:
        write(root / "dev/infiniband/uverbs0", "")


def derived(facts: Facts, **more: object) -> Facts:
    facts.set("gpu.count", 1)
    facts.set("gpu[0].pci_bus_id", "00000000:19:00.0")
    facts.set("system.memlock_bytes", more.get("memlock"))
    facts.set("container.detected", False)
    assert derive_all(facts) == []
    return facts

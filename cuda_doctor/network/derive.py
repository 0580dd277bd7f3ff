"""What NCCL and Gloo will make of this node's network, from the ``net.*`` facts: the interfaces
NCCL's bootstrap would take (NCCL's ``ncclFindInterfaces`` and its prefix syntax), the names
Gloo cannot find, the RDMA ports NCCL_IB_HCA selects, the GPUDirect RDMA path, the memlock limit
where RDMA memory is registered, the network plugin NCCL would load, and the NIC nearest each
GPU.  Every output is a ``derived.net.*`` fact; docs/network.md says what each means.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from cuda_doctor.core.facts import Facts, indexed, need

#: NCCL keeps at most this many entries of NCCL_SOCKET_IFNAME (MAX_IFS) and of NCCL_IB_HCA (MAX_IB_DEVS).
MAX_SOCKET_ENTRIES = 16
MAX_IB_ENTRIES = 32
#: NCCL's automatic choice when NCCL_SOCKET_IFNAME is unset (src/misc/socket.cc), in order.
DEFAULT_STEPS = (("ib", "ib"), ("general", "^docker,lo,virbr"), ("docker", "docker"), ("lo", "lo"), ("virbr", "virbr"))
#: Below this memlock limit NCCL's first registrations fail ("ibv_reg_mr … Cannot allocate memory").
MEMLOCK_LOW_BYTES = 64 * 2**20
#: The Linux release that added DMA-BUF memory registration to RDMA (ibv_reg_dmabuf_mr).
DMABUF_KERNEL = (5, 12)


class Spec(NamedTuple):
    """A parsed NCCL interface list: ``^`` excludes, ``=`` matches whole names, entries may carry ``:port``."""

    exclude: bool
    exact: bool
    entries: tuple[tuple[str, int | None], ...]


def parse_spec(text: str, limit: int) -> Spec:
    """As NCCL's ``parseStringList`` reads it: ``^`` first, then ``=``, then comma-separated
    ``prefix[:port]`` entries; an empty prefix is dropped, and only the first ``limit`` count."""
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    entries: list[tuple[str, int | None]] = []
    for entry in text.split(","):
        prefix, _, rest = entry.partition(":")
        if not prefix:
            continue
        port_text = rest.split(":", 1)[0]
        entries.append((prefix, _atoi(port_text) if port_text else None))
        if len(entries) == limit:
            break
    return Spec(exclude, exact, tuple(entries))


def _atoi(text: str) -> int:
    """C's ``atoi``: the leading digits, 0 when there are none."""
    found = re.match(r"\s*[-+]?\d+", text)
    return int(found.group()) if found else 0


def selects(spec: Spec, name: str, port: int | None = None) -> bool:
    """Whether NCCL takes ``name`` (and ``port``) under ``spec`` (``matchIfList`` xor ``^``); an
    empty list matches everything, so ``^`` alone excludes everything."""
    if not spec.entries:
        matched = True
    else:
        matched = any(
            (name == prefix if spec.exact else name.startswith(prefix))
            and (port is None or wanted is None or port == wanted)
            for prefix, wanted in spec.entries
        )
    return matched != spec.exclude


def derive(facts: Facts) -> None:
    _origins(facts)
    _interfaces(facts)
    _nccl_socket(facts)
    _gloo(facts)
    _rdma(facts)
    _gdr(facts)
    _memlock(facts)
    _plugin(facts)
    _forced_network(facts)
    _locality(facts)


# -- interfaces --------------------------------------------------------------------------------


def _usable(interface: dict[str, Any], family: str | None) -> bool:
    """An interface NCCL's ``ncclOsFindInterfaces`` keeps: running, with an IPv4 address or an
    IPv6 one other than loopback, of the family NCCL_SOCKET_FAMILY forces."""
    if not interface.get("running"):
        return False
    ipv4 = bool(interface.get("ipv4"))
    ipv6 = any(address != "::1" for address in interface.get("ipv6") or [])
    if family == "AF_INET":
        return ipv4
    if family == "AF_INET6":
        return ipv6
    return ipv4 or ipv6


def _ordered(interfaces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In the order getifaddrs lists them: the IPv4 addresses first, then IPv6, each by index."""

    def key(interface: dict[str, Any]) -> tuple[int, int]:
        return (0 if interface.get("ipv4") else 1, interface.get("index") or 0)

    return sorted(interfaces, key=key)


def describe(interface: dict[str, Any]) -> str:
    """ "eth0 (up, 10.0.0.2)", "eth1 (down)", "ib0 (up, no address)"."""
    state = "up" if interface.get("running") else str(interface.get("operstate") or "down")
    addresses = list(interface.get("ipv4") or []) + [a for a in interface.get("ipv6") or [] if a != "::1"]
    if not interface.get("running"):
        return f"{interface['name']} ({state})"
    return f"{interface['name']} ({state}, {addresses[0] if addresses else 'no address'})"


def _origins(facts: Facts) -> None:
    """ " (set in /etc/nccl.conf)" after a variable NCCL takes from a file rather than the
    environment, "" otherwise: a fix must say where the value lives."""
    files = facts.get("net.nccl_from_files") if facts.has("net.nccl_from_files") else {}
    for variable, out in (("NCCL_SOCKET_IFNAME", "socket_ifname_origin"), ("NCCL_IB_HCA", "ib_hca_origin")):
        path = (files or {}).get(variable)
        facts.set(f"derived.net.{out}", f" (set in {path})" if path else "")


def _interfaces(facts: Facts) -> None:
    out = "derived.net.interface_summary"
    if not need(facts, out, "net.interfaces"):
        return
    interfaces = facts.get("net.interfaces") or []
    facts.set(out, ", ".join(describe(i) for i in interfaces) or "no interface at all")


def _nccl_socket(facts: Facts) -> None:
    outs = (
        "derived.net.nccl_interfaces",
        "derived.net.nccl_interface",
        "derived.net.nccl_selection",
        "derived.net.nccl_ifname_unusable",
        "derived.net.suggested_ifname",
    )
    if not need(facts, outs[0], "net.interfaces", "net.ipv4_read", "net.nccl_socket_ifname"):
        facts.mark_all_unknown((*outs[1:], "derived.net.suggested_interface"), facts.unknown_reason(outs[0]))
        return
    interfaces = _ordered(facts.get("net.interfaces") or [])
    family = facts.get("net.nccl_socket_family")
    usable = [i for i in interfaces if _usable(i, family)]
    value = facts.get("net.nccl_socket_ifname")
    general = [i["name"] for i in usable if selects(parse_spec("^docker,lo,virbr", MAX_SOCKET_ENTRIES), i["name"])]
    if general:
        facts.set(outs[4], f"={general[0]}")
        facts.set("derived.net.suggested_interface", general[0])
    else:
        why = "no interface here other than lo, docker* or virbr* is up with an address"
        facts.mark_all_unknown((outs[4], "derived.net.suggested_interface"), why)
    # NCCL reads a value of one character as unset (``strlen(env) > 1``)
    if value is not None and len(value) > 1:
        spec = parse_spec(value, MAX_SOCKET_ENTRIES)
        chosen = [i["name"] for i in usable if selects(spec, i["name"])]
        unusable = [describe(i) for i in interfaces if selects(spec, i["name"]) and not _usable(i, family)]
        facts.set(outs[3], unusable)
        _chosen(facts, outs, chosen, "set")
        return
    facts.set(outs[3], [])
    if facts.get("net.nccl_comm_id"):
        # NCCL then takes an interface on the subnet of NCCL_COMM_ID's address, which is not modelled
        facts.mark_all_unknown(outs[:3], "NCCL_COMM_ID is set: NCCL takes the interface on its address's subnet")
        return
    for step, prefixes in DEFAULT_STEPS:
        spec = parse_spec(prefixes, MAX_SOCKET_ENTRIES)
        chosen = [i["name"] for i in usable if selects(spec, i["name"])]
        if chosen:
            _chosen(facts, outs, chosen, step)
            return
    _chosen(facts, outs, [], "none")


def _chosen(facts: Facts, outs: tuple[str, ...], chosen: list[str], selection: str) -> None:
    facts.set(outs[0], chosen[:MAX_SOCKET_ENTRIES])
    facts.set(outs[1], chosen[0] if chosen else None)
    facts.set(outs[2], selection)


def _gloo(facts: Facts) -> None:
    """Gloo (PyTorch's ``GLOO_SOCKET_IFNAME``, comma-separated) takes each name exactly and needs
    an address on it, up or not; otherwise "Unable to find address for: NAME"."""
    out = "derived.net.gloo_missing"
    if not need(facts, out, "net.gloo_socket_ifname", "net.interfaces", "net.ipv4_read"):
        others = ("derived.net.gloo_nccl_syntax", "derived.net.gloo_first_missing")
        facts.mark_all_unknown(others, facts.unknown_reason(out))
        return
    value = facts.get("net.gloo_socket_ifname") or ""
    by_name = {i["name"]: i for i in facts.get("net.interfaces") or []}
    missing = []
    for name in [part for part in value.split(",") if part] if len(value) > 1 else []:
        interface = by_name.get(name)
        if interface is None:
            missing.append(f"{name} (no such interface)")
        elif not interface.get("ipv4") and not interface.get("ipv6"):
            missing.append(f"{name} (no address)")
    facts.set(out, missing)
    # Gloo stops at the first name it cannot find, and its error names only that one
    facts.set("derived.net.gloo_first_missing", missing[0].split(" (", 1)[0] if missing else None)
    facts.set("derived.net.gloo_nccl_syntax", value.startswith(("^", "=")))


# -- RDMA --------------------------------------------------------------------------------------


def _active(port: dict[str, Any]) -> bool:
    return str(port.get("state") or "").endswith("ACTIVE")


def _rdma(facts: Facts) -> None:
    outs = (
        "derived.net.hca_count",
        "derived.net.efa_count",
        "derived.net.ib_ports_active",
        "derived.net.ib_ports_down",
        "derived.net.ib_hca_matches",
    )
    if not need(facts, outs[0], "net.rdma_devices"):
        facts.mark_all_unknown((*outs[1:], "derived.net.ib_hca_suggestion"), facts.unknown_reason(outs[0]))
        return
    devices = facts.get("net.rdma_devices") or []
    hcas = [d for d in devices if not d.get("efa")]
    facts.set(outs[0], len(hcas))
    facts.set(outs[1], len(devices) - len(hcas))
    # NCCL's IB transport takes active ports with an InfiniBand or Ethernet (RoCE) link layer
    active: list[tuple[str, int]] = []
    down = []
    for device in hcas:
        for port in device.get("ports") or []:
            where = f"{device['name']}:{port['port']}"
            if _active(port) and port.get("link_layer") in ("InfiniBand", "Ethernet"):
                active.append((device["name"], port["port"]))
            elif not _active(port):
                down.append(f"{where} ({port.get('state')}, {port.get('phys_state')})")
    facts.set(outs[2], [f"{name}:{port}" for name, port in active])
    if active:
        facts.set("derived.net.ib_hca_suggestion", "=" + ",".join(f"{name}:{port}" for name, port in active))
    else:
        facts.mark_unknown("derived.net.ib_hca_suggestion", "no RDMA port here is active")
    facts.set(outs[3], down)
    value = facts.get("net.nccl_ib_hca")
    spec = parse_spec(value or "", MAX_IB_ENTRIES)
    facts.set(outs[4], [f"{name}:{port}" for name, port in active if selects(spec, name, port)])


def _kernel_release(text: Any) -> tuple[int, int] | None:
    found = re.match(r"(\d+)\.(\d+)", str(text or ""))
    return (int(found.group(1)), int(found.group(2))) if found else None


def _gdr(facts: Facts) -> None:
    """How GPU memory reaches the HCAs (NCCL net_ib/gdr.cc): a peer-memory module, or DMA-BUF
    (the open kernel modules, Linux 5.12 or later, NCCL 2.13 or later), or neither."""
    out = "derived.net.gdr"
    if not need(facts, out, "derived.net.hca_count", "net.peermem"):
        return
    if not facts.get("derived.net.hca_count"):
        facts.set(out, "not_applicable")
    elif facts.get("net.peermem"):
        facts.set(out, "peermem")
    elif facts.get("net.nccl_dmabuf_enable") == "0":
        facts.set(out, "none")  # DMA-BUF turned off: the peer-memory module is the only path
    else:
        flavour = facts.get("kernel.nvidia_module_flavour")
        release = _kernel_release(facts.get("system.kernel"))
        if flavour == "proprietary" or (release is not None and release < DMABUF_KERNEL):
            facts.set(out, "none")
        elif flavour == "open" and release is not None:
            facts.set(out, "dmabuf")
        else:
            facts.set(out, "dmabuf_unknown")


def _memlock(facts: Facts) -> None:
    outs = ("derived.net.memlock_limit", "derived.net.launch_context")
    if not need(facts, outs[0], "system.memlock_bytes"):
        facts.mark_unknown(outs[1], facts.unknown_reason(outs[0]))
        return
    limit = facts.get("system.memlock_bytes")
    facts.set(outs[0], "unlimited" if limit is None else _size(int(limit)))
    runtime = facts.get("container.runtime")
    if facts.get("net.slurm_job"):
        context = "slurm"
    elif runtime == "kubernetes":
        context = "kubernetes"
    elif facts.get("container.detected"):
        context = "container"
    else:
        context = "host"
    facts.set(outs[1], context)


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"


def plugin_names(value: str | None) -> list[str]:
    """The files NCCL tries for NCCL_NET_PLUGIN (src/plugin/plugin_open.cc): ``libnccl-net.so``
    when unset, none for "none", else each comma entry as given and, when it is a bare name,
    also as ``libnccl-net-NAME.so``."""
    if value is None:
        return ["libnccl-net.so"]
    if value.lower() == "none":
        return []
    names = []
    for name in (part for part in value.split(",") if part):
        names.append(name)
        if "/" not in name and not (name.startswith("lib") and name.endswith(".so")):
            names.append(f"libnccl-net-{name}.so")
    return names


def _plugin(facts: Facts) -> None:
    outs = ("derived.net.plugin_loaded", "derived.net.plugin_names")
    if not need(facts, outs[0], "net.nccl_net_plugins", "net.nccl_net_plugin"):
        facts.mark_all_unknown((outs[1], "derived.net.plugin_suggestion"), facts.unknown_reason(outs[0]))
        return
    names = plugin_names(facts.get("net.nccl_net_plugin"))
    found = list(facts.get("net.nccl_net_plugins") or [])
    loaded = None
    for name in names:
        if "/" in name:
            loaded = name if name in found else None
        else:
            loaded = next((path for path in found if path.rsplit("/", 1)[-1] == name), None)
        if loaded:
            break
    facts.set(outs[0], loaded)
    facts.set(outs[1], names)
    if found:
        name = found[0].rsplit("/", 1)[-1]
        bare = re.match(r"^libnccl-net-(.+)\.so$", name)
        facts.set("derived.net.plugin_suggestion", bare.group(1) if bare else found[0])
    else:
        facts.mark_unknown("derived.net.plugin_suggestion", "no NCCL network plugin is on the library path")


def _forced_network(facts: Facts) -> None:
    """What NCCL_NET asks for (src/plugin/net.cc: only a network of that name, case aside, is
    initialised; none left is "Failed to initialize any NET plugin")."""
    outs = ("derived.net.nccl_net_kind", "derived.net.nccl_net_available")
    if not need(facts, outs[0], "net.nccl_net"):
        facts.mark_unknown(outs[1], facts.unknown_reason(outs[0]))
        return
    value = facts.get("net.nccl_net")
    if not value:
        facts.set(outs[0], None)
        facts.set(outs[1], None)
        return
    kind = {"ib": "ib", "socket": "socket"}.get(value.lower(), "plugin")
    facts.set(outs[0], kind)
    if kind == "socket":
        facts.set(outs[1], True)
    elif kind == "ib":
        if not need(facts, outs[1], "derived.net.ib_hca_matches"):
            return
        facts.set(outs[1], facts.get("net.nccl_ib_disable") != "1" and bool(facts.get("derived.net.ib_hca_matches")))
    elif need(facts, outs[1], "derived.net.plugin_loaded"):
        # whether the plugin's network carries that name is not known until it loads
        facts.set(outs[1], facts.get("derived.net.plugin_loaded") is not None)


# -- locality ----------------------------------------------------------------------------------


def pci_address(text: str) -> str | None:
    """NVML's "00000000:18:00.0" in the kernel's form "0000:18:00.0"; None when it is no address."""
    found = re.match(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", text.strip())
    if not found:
        return None
    domain, bus, device, function = found.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def relation(gpu: dict[str, Any], nic: dict[str, Any]) -> str:
    """How a NIC sits to a GPU, in NCCL's words: "PIX/PXB" (under a common PCIe switch: they
    share a port below the host bridge), "PHB" (the same host bridge), "NODE" (the same NUMA
    node), "SYS" (across NUMA nodes), or "unknown"."""
    gpu_path, nic_path = list(gpu.get("pci_path") or []), list(nic.get("pci_path") or [])
    common = 0
    for left, right in zip(gpu_path[:-1], nic_path[:-1], strict=False):
        if left != right:
            break
        common += 1
    if common >= 2:
        return "PIX/PXB"
    if common == 1:
        return "PHB"
    gpu_numa, nic_numa = gpu.get("numa_node"), nic.get("numa_node")
    if gpu_numa is None or nic_numa is None:
        return "unknown"
    return "NODE" if gpu_numa == nic_numa else "SYS"


_RANK = {"PIX/PXB": 0, "PHB": 1, "NODE": 2, "SYS": 3, "unknown": 4}


def _nics(facts: Facts) -> list[dict[str, Any]]:
    """The NICs NCCL would carry inter-node traffic on: the RDMA devices when there are any,
    else the Ethernet interfaces on the PCI bus."""
    devices = [d for d in facts.get("net.rdma_devices") or [] if d.get("pci")]
    if devices:
        return devices
    return [i for i in facts.get("net.interfaces") or [] if i.get("pci") and i.get("kind") != "loopback"]


def _locality(facts: Facts) -> None:
    outs = ("derived.net.gpu_nic_locality", "derived.net.gpus_without_near_nic")
    if not need(facts, outs[0], "net.gpu_pci", "net.rdma_devices", "gpu.count"):
        facts.mark_all_unknown((outs[1], "derived.net.locality_summary"), facts.unknown_reason(outs[0]))
        return
    places = {place["pci"]: place for place in facts.get("net.gpu_pci") or [] if place.get("pci")}
    nics = _nics(facts)
    rows: list[dict[str, Any]] = []
    far: list[str] = []
    for i in facts.indices("gpu"):
        address = pci_address(str(facts.get(indexed("gpu", i, "pci_bus_id")) or ""))
        place = places.get(address or "")
        if place is None:
            continue  # a GPU sysfs does not show here (a container's partial /sys)
        ranked = sorted(((relation(place, nic), nic["name"]) for nic in nics), key=lambda r: (_RANK[r[0]], r[1]))
        best = ranked[0][0] if ranked else None
        nearest = [name for kind, name in ranked if kind == best]
        rows.append({"gpu": i, "pci": address, "numa_node": place.get("numa_node"), "relation": best, "nics": nearest})
        if nics and best != "PIX/PXB":
            far.append(f"GPU {i} ({address}): nearest {_join(nearest)} ({best})")
    facts.set(outs[0], rows)
    facts.set(outs[1], far)
    summary = [f"GPU {row['gpu']}: {_join(row['nics'])} ({row['relation']})" for row in rows if row["nics"]]
    facts.set("derived.net.locality_summary", "; ".join(summary) or "no NIC on the PCI bus")


def _join(names: Iterable[str]) -> str:
    return ", ".join(names)

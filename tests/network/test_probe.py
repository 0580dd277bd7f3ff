"""The network probe against fake sysfs, procfs and /dev trees under tmp_path, and once against
this machine's own /sys (structure only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.network.probe import PROBE, NetworkProbe, ipv6_addresses, kernel_ipv4_addresses
from tests.network.fake_node import (
    SWITCH,
    basic_node,
    bind_driver,
    collect,
    derived,
    hgx_node,
    interface,
    pci_device,
    rdma_device,
    write,
)


def by_name(facts: Facts) -> dict[str, dict]:
    return {i["name"]: i for i in facts.get("net.interfaces")}


def test_interfaces_state_addresses_and_place(tmp_path: Path) -> None:
    basic_node(tmp_path)
    interfaces = by_name(collect(tmp_path))
    assert sorted(interfaces) == ["eth0", "eth1", "lo"]
    eth0, eth1, lo = interfaces["eth0"], interfaces["eth1"], interfaces["lo"]
    assert (eth0["up"], eth0["running"], eth0["mtu"], eth0["kind"]) == (True, True, 1500, "ethernet")
    assert eth0["ipv4"] == ["10.0.0.5"] and eth0["ipv6"] == ["fd00::2"]
    assert eth0["pci"] == "0000:00:03.0" and eth0["pci_path"] == ["pci0000:00", "0000:00:03.0"]
    assert eth0["numa_node"] is None and eth0["driver"] == "virtio-pci"
    assert (eth1["up"], eth1["running"], eth1["ipv4"]) == (False, False, [])
    assert (lo["kind"], lo["running"], lo["ipv6"]) == ("loopback", True, ["::1"])


def test_up_but_no_carrier_is_not_running(tmp_path: Path) -> None:
    interface(tmp_path, "eth0", index=2, operstate="down", flags=0x1003)  # IFF_UP without a link
    eth0 = by_name(collect(tmp_path))["eth0"]
    assert (eth0["up"], eth0["running"]) == (True, False)


def test_ipv4_unknown_under_another_root_without_a_reader(tmp_path: Path) -> None:
    basic_node(tmp_path)
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={}))
    assert "IPv4 addresses come from the running kernel" in facts.unknown_reason("net.ipv4_read")
    assert by_name(facts)["eth0"]["ipv4"] is None


def test_a_failing_ipv4_reader_is_a_reason(tmp_path: Path) -> None:
    basic_node(tmp_path)

    def refuse() -> dict[str, list[str]]:
        raise PermissionError(1, "Operation not permitted")

    facts = NetworkProbe(ipv4_reader=refuse).collect(ProbeContext(root=tmp_path, env={}))
    assert (
        facts.unknown_reason("net.ipv4_read") == "the kernel did not list the IPv4 addresses: Operation not permitted"
    )


def test_no_sysfs_and_no_ipv6(tmp_path: Path) -> None:
    facts = collect(tmp_path)
    assert "/sys/class/net is not there" in facts.unknown_reason("net.interfaces")
    assert facts.get("net.rdma_devices") == [] and facts.get("net.ipv6_read") is None


def test_variables_are_recorded_as_set(tmp_path: Path) -> None:
    env = {"NCCL_SOCKET_IFNAME": "^docker,lo", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "=mlx5_0:1",
           "SLURM_JOB_ID": "42"}  # fmt: skip
    facts = collect(tmp_path, env)
    assert facts.get("net.nccl_socket_ifname") == "^docker,lo"
    assert facts.get("net.gloo_socket_ifname") == "eth0"
    assert facts.get("net.nccl_ib_hca") == "=mlx5_0:1"
    assert facts.get("net.nccl_net_plugin") is None
    assert facts.get("net.slurm_job") is True


def test_rdma_devices_ports_and_uverbs(tmp_path: Path) -> None:
    hgx_node(tmp_path)
    facts = collect(tmp_path)
    [device] = facts.get("net.rdma_devices")
    assert device["name"] == "mlx5_0" and device["driver"] == "mlx5_core" and device["efa"] is False
    assert device["pci"] == "0000:1a:00.0" and device["numa_node"] == 0
    assert device["ports"] == [
        {
            "port": 1,
            "state": "4: ACTIVE",
            "phys_state": "5: LinkUp",
            "rate": "400 Gb/sec (4X NDR)",
            "link_layer": "InfiniBand",
        }
    ]
    assert facts.get("net.uverbs") == ["uverbs0"]
    assert facts.get("net.gpu_pci") == [
        {"pci": "0000:19:00.0", "pci_path": [*SWITCH, "0000:18:00.0", "0000:19:00.0"], "numa_node": 0}
    ]


def test_peermem_as_nccl_detects_it(tmp_path: Path) -> None:
    assert collect(tmp_path).get("net.peermem") is None
    write(tmp_path / "sys/module/nvidia_peermem/version", "580.159.04\n")
    assert collect(tmp_path).get("net.peermem") == "/sys/module/nvidia_peermem/version"


def test_efa_by_its_driver(tmp_path: Path) -> None:
    efa = pci_device(tmp_path, ["pci0000:00", "0000:00:1b.0", "0000:10:1b.0"], vendor="0x1d0f", numa_node="0",
                     **{"class": "0x020000"})  # fmt: skip
    bind_driver(tmp_path, efa, "efa")
    rdma_device(tmp_path, "rdmap16s27", efa, {1: ("4: ACTIVE", "5: LinkUp", "Unspecified")})
    (tmp_path / "sys/module/efa").mkdir(parents=True)
    facts = collect(tmp_path)
    assert [d["efa"] for d in facts.get("net.rdma_devices")] == [True]
    assert facts.get("net.efa_module_loaded") is True


def test_plugins_on_the_library_path(tmp_path: Path) -> None:
    write(tmp_path / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "")
    write(tmp_path / "usr/local/lib/libnccl-net.so", "")
    write(tmp_path / "usr/local/lib/libnccl.so.2", "")  # NCCL itself, not a plugin
    write(tmp_path / "etc/ld.so.conf", "include ld.so.conf.d/*.conf\n")  # relative to /etc
    write(tmp_path / "etc/ld.so.conf.d/local.conf", "# the local libraries\n/usr/local/lib\n")
    facts = collect(tmp_path, {"LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib"})
    assert facts.get("net.library_dirs")[:2] == ["/opt/amazon/ofi-nccl/lib", "/usr/local/lib"]
    assert facts.get("net.nccl_net_plugins") == [
        "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
        "/usr/local/lib/libnccl-net.so",
    ]


def test_ipv6_parsing(tmp_path: Path) -> None:
    write(tmp_path / "proc/net/if_inet6", "fe80000000000000020000fffe000001 02 40 20 80 eth0\nnot a line\n")
    assert ipv6_addresses(tmp_path) == {"eth0": ["fe80::200:ff:fe00:1"]}


# -- derived on fake trees: the cases the rules judge, end to end ---------------------------------


@pytest.mark.parametrize(
    ("value", "chosen"),
    [
        ("eth", ["eth0"]),  # a prefix; eth1 is down
        ("=eth0", ["eth0"]),
        ("=eth", []),  # exact: no interface is called "eth"
        ("^eth", ["lo"]),
        ("^=eth0,lo", []),  # eth1 is down, so nothing is left
        ("eth1", []),
        ("lo,eth", ["lo", "eth0"]),  # getifaddrs order: by index
    ],
)
def test_nccl_prefix_syntax_on_a_node(tmp_path: Path, value: str, chosen: list[str]) -> None:
    basic_node(tmp_path)
    facts = derived(collect(tmp_path, {"NCCL_SOCKET_IFNAME": value}))
    assert facts.get("derived.net.nccl_interfaces") == chosen
    assert facts.get("derived.net.nccl_selection") == "set"


def test_nccl_default_skips_lo_and_docker(tmp_path: Path) -> None:
    interface(tmp_path, "lo", index=1, operstate="unknown", flags=0x9, kind=772)
    interface(tmp_path, "docker0", index=2, operstate="up", flags=0x1003)
    facts = derived(collect(tmp_path, ipv4={"lo": ["127.0.0.1"], "docker0": ["172.17.0.1"]}))
    assert facts.get("derived.net.nccl_selection") == "docker"
    assert facts.get("derived.net.nccl_interfaces") == ["docker0"]
    interface(tmp_path, "ens5", index=3, operstate="up", flags=0x1003)
    facts = derived(collect(tmp_path, ipv4={"lo": ["127.0.0.1"], "docker0": ["172.17.0.1"], "ens5": ["10.0.0.9"]}))
    assert (facts.get("derived.net.nccl_selection"), facts.get("derived.net.nccl_interface")) == ("general", "ens5")


def test_interface_down_leaves_nothing(tmp_path: Path) -> None:
    interface(tmp_path, "eth0", index=2, operstate="down", flags=0x1002)
    facts = derived(collect(tmp_path, ipv4={}))
    assert facts.get("derived.net.nccl_selection") == "none"
    assert facts.get("derived.net.interface_summary") == "eth0 (down)"


def test_ib_hca_ports_and_locality(tmp_path: Path) -> None:
    hgx_node(tmp_path)
    facts = derived(collect(tmp_path, {"NCCL_IB_HCA": "=mlx5_0:1"}))
    assert facts.get("derived.net.ib_hca_matches") == ["mlx5_0:1"]
    assert facts.get("derived.net.gpu_nic_locality") == [
        {"gpu": 0, "pci": "0000:19:00.0", "numa_node": 0, "relation": "PIX/PXB", "nics": ["mlx5_0"]}
    ]
    assert facts.get("derived.net.gpus_without_near_nic") == []
    assert facts.get("derived.net.gdr") == "dmabuf_unknown"  # no peermem, the module flavour not read
    facts = derived(collect(tmp_path, {"NCCL_IB_HCA": "mlx5_0:2"}))
    assert facts.get("derived.net.ib_hca_matches") == []


def test_port_down_is_not_taken(tmp_path: Path) -> None:
    hgx_node(tmp_path, port_state="1: DOWN", uverbs=False)
    facts = derived(collect(tmp_path))
    assert facts.get("derived.net.ib_ports_active") == []
    assert facts.get("derived.net.ib_ports_down") == ["mlx5_0:1 (1: DOWN, 5: LinkUp)"]
    assert facts.get("net.uverbs") == []


def test_memlock_low_with_an_hca(tmp_path: Path) -> None:
    hgx_node(tmp_path)
    facts = derived(collect(tmp_path), memlock=8 * 2**20)
    assert facts.get("derived.net.memlock_limit") == "8 MiB"
    assert facts.get("derived.net.hca_count") == 1
    assert facts.get("derived.net.launch_context") == "host"


def test_efa_without_plugin(tmp_path: Path) -> None:
    efa = pci_device(tmp_path, ["pci0000:00", "0000:00:1b.0", "0000:10:1b.0"], vendor="0x1d0f", **{"class": "0x020000"})
    bind_driver(tmp_path, efa, "efa")
    rdma_device(tmp_path, "rdmap16s27", efa, {1: ("4: ACTIVE", "5: LinkUp", "Unspecified")})
    facts = derived(collect(tmp_path))
    assert (facts.get("derived.net.efa_count"), facts.get("derived.net.hca_count")) == (1, 0)
    assert facts.get("derived.net.plugin_loaded") is None
    assert facts.get("derived.net.ib_ports_active") == []  # NCCL's IB transport does not take EFA


# -- this machine -------------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.isdir("/sys/class/net/lo"), reason="no sysfs network class here")
def test_this_machine() -> None:
    facts = PROBE.collect(ProbeContext())
    interfaces = by_name(facts)
    assert "lo" in interfaces and interfaces["lo"]["kind"] == "loopback"
    for entry in interfaces.values():
        assert isinstance(entry["up"], bool) and isinstance(entry["running"], bool)
        assert entry["ipv4"] is None or all(isinstance(a, str) for a in entry["ipv4"])
    assert isinstance(facts.get("net.rdma_devices"), list)
    assert isinstance(facts.get("net.library_dirs"), list)


def test_kernel_ipv4_lists_loopback() -> None:
    try:
        found = kernel_ipv4_addresses()
    except OSError as exc:  # a sandbox without sockets
        pytest.skip(f"no socket here: {exc}")
    if "lo" in found:
        assert "127.0.0.1" in found["lo"]
    assert all(isinstance(name, str) and addresses for name, addresses in found.items())


def test_nccl_conf_files_under_the_environment(tmp_path: Path) -> None:
    write(tmp_path / "etc/nccl.conf", "NCCL_SOCKET_IFNAME==ens5\nNCCL_IB_HCA=mlx5_0\n# NCCL_NET=IB\nNCCL_DEBUG=WARN\n")
    write(tmp_path / "home/u/.nccl.conf", "NCCL_IB_HCA=mlx5_1\r\nNCCL_NET_PLUGIN = ofi\n")
    facts = collect(tmp_path, {"HOME": "/home/u", "NCCL_NET": "Socket"})
    assert facts.get("net.nccl_conf_files") == ["/home/u/.nccl.conf", "/etc/nccl.conf"]
    assert facts.get("net.nccl_socket_ifname") == "=ens5"
    assert facts.get("net.nccl_ib_hca") == "mlx5_1"  # the user's file before /etc/nccl.conf
    assert facts.get("net.nccl_net") == "Socket"  # the environment before either file
    assert facts.get("net.nccl_net_plugin") is None  # "NCCL_NET_PLUGIN " (with a space) is another name
    assert facts.get("net.nccl_from_files") == {
        "NCCL_IB_HCA": "/home/u/.nccl.conf",
        "NCCL_SOCKET_IFNAME": "/etc/nccl.conf",
    }
    facts = collect(tmp_path, {"HOME": "/home/u", "NCCL_CONF_FILE": "/etc/nccl.conf"})
    assert facts.get("net.nccl_conf_files") == ["/etc/nccl.conf", "/etc/nccl.conf"]
    assert facts.get("net.nccl_ib_hca") == "mlx5_0"  # NCCL_CONF_FILE replaces ~/.nccl.conf

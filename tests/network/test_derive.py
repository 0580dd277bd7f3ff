"""NCCL's interface-list syntax, plugin names and PCI relations, as NCCL's source reads them
(src/misc/utils.cc parseStringList/matchIfList, src/plugin/plugin_open.cc, src/graph/paths.cc)."""

from __future__ import annotations

import pytest

from cuda_doctor.network.derive import parse_spec, pci_address, plugin_names, relation, selects


@pytest.mark.parametrize(
    ("spec", "name", "port", "taken"),
    [
        ("eth", "eth0", None, True),
        ("eth", "ens5", None, False),
        ("=eth0", "eth0", None, True),
        ("=eth0", "eth01", None, False),
        ("=eth0,eth1", "eth1", None, True),  # = applies to every entry
        ("^docker", "docker0", None, False),
        ("^docker", "eth0", None, True),
        ("^=docker0", "docker01", None, True),
        ("=^docker", "docker0", None, False),  # = then ^ is a name starting with ^, not an exclusion
        ("mlx5_0:1", "mlx5_0", 1, True),
        ("mlx5_0:1", "mlx5_0", 2, False),
        ("mlx5_0", "mlx5_0", 2, True),  # no port: every port
        ("=mlx5_0:1,mlx5_1:1", "mlx5_1", 1, True),
        ("^mlx5_0:1", "mlx5_0", 2, True),
        ("^", "eth0", None, False),  # an empty list matches everything, so ^ alone excludes everything
        (",,eth", "eth0", None, True),  # empty entries are dropped
    ],
)
def test_selects(spec: str, name: str, port: int | None, taken: bool) -> None:
    assert selects(parse_spec(spec, 16), name, port) is taken


def test_only_the_first_entries_count() -> None:
    spec = parse_spec("=" + ",".join(f"if{i}" for i in range(20)), 16)
    assert len(spec.entries) == 16
    assert selects(spec, "if15") and not selects(spec, "if17")


def test_plugin_names() -> None:
    assert plugin_names(None) == ["libnccl-net.so"]
    assert plugin_names("none") == [] and plugin_names("NONE") == []
    assert plugin_names("ofi") == ["ofi", "libnccl-net-ofi.so"]
    assert plugin_names("libnccl-net-ofi.so") == ["libnccl-net-ofi.so"]
    assert plugin_names("/opt/x/libnccl-net.so,aws-ofi") == [
        "/opt/x/libnccl-net.so",
        "aws-ofi",
        "libnccl-net-aws-ofi.so",
    ]


def test_pci_address() -> None:
    assert pci_address("00000000:3B:00.0") == "0000:3b:00.0"
    assert pci_address("0000:19:00.0") == "0000:19:00.0"
    assert pci_address("GPU-3d95") is None


@pytest.mark.parametrize(
    ("nic_path", "nic_numa", "expected"),
    [
        (["pci0000:16", "0000:16:02.0", "0000:17:00.0", "0000:18:10.0", "0000:1a:00.0"], 0, "PIX/PXB"),
        (["pci0000:16", "0000:16:03.0", "0000:1c:00.0"], 0, "PHB"),
        (["pci0000:3a", "0000:3a:02.0", "0000:3b:00.0"], 0, "NODE"),
        (["pci0000:97", "0000:97:02.0", "0000:98:00.0"], 1, "SYS"),
        (["pci0000:97", "0000:97:02.0", "0000:98:00.0"], None, "unknown"),
    ],
)
def test_relation(nic_path: list[str], nic_numa: int | None, expected: str) -> None:
    gpu = {"pci_path": ["pci0000:16", "0000:16:02.0", "0000:17:00.0", "0000:18:00.0", "0000:19:00.0"], "numa_node": 0}
    assert relation(gpu, {"pci_path": nic_path, "numa_node": nic_numa}) == expected

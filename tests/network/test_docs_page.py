"""docs/network.md names every network rule and every fact the probe and its deriver write."""

from __future__ import annotations

from pathlib import Path

from cuda_doctor.core.rules import load_rules
from tests.network.fake_node import collect, derived, hgx_node

PAGE = (Path(__file__).parents[2] / "docs" / "network.md").read_text(encoding="utf-8")


def test_every_network_rule_is_on_the_page() -> None:
    ids = [rule.id for rule in load_rules() if rule.category == "network"]
    assert ids, "no network rules loaded"
    assert [i for i in ids if f"| {i} |" not in PAGE] == []


def test_every_fact_is_on_the_page(tmp_path: Path) -> None:
    hgx_node(tmp_path)
    facts = derived(collect(tmp_path, {"GLOO_SOCKET_IFNAME": "eth0"}))
    names = [n for n in [*facts.values, *facts.unknown] if n.startswith(("net.", "derived.net."))]
    assert len(names) > 30
    assert [n for n in names if f"`{n}`" not in PAGE] == []

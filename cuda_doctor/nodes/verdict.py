"""What rank 0 concludes: the ``nodes.*`` facts from what every rank reported, judged by the
rules CD851–CD869 into one report.  The comparison of configurations is ``compare.fleet``'s."""

from __future__ import annotations

import time
from collections.abc import Iterable

from cuda_doctor.compare.fleet import compare_fleet
from cuda_doctor.compare.keys import show
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.config import Config
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.reportfile import SavedReport
from cuda_doctor.core.rules import Judgement, judge, load_rules
from cuda_doctor.nodes.session import Gathered, Member
from cuda_doctor.tables import load_table

#: The rules of this command: CD851–CD869.
RULE_PREFIXES = ("CD85", "CD86")
#: Where the share of a network link's rate an all-reduce reaches is kept.
TABLE = "interconnect_expected"


def node_facts(member: Member) -> Facts:
    """One node's facts as it reported them, with torch's versions from its all-reduce child."""
    raw = member.hello.get("facts") or {}
    facts = Facts(dict(raw.get("values") or {}), {str(k): str(v) for k, v in (raw.get("unknown") or {}).items()})
    outcome = member.allreduce
    versions = outcome.versions if outcome is not None else {}
    if versions.get("torch_installed") is False:
        facts.set("torch.installed", False)
        facts.mark_all_unknown(
            ("torch.version", "torch.cuda_build", "torch.nccl_version"),
            f"torch cannot be imported: {versions.get('import_error')}",
        )
    elif versions:
        facts.set("torch.installed", True)
        facts.set("torch.version", versions.get("torch_version"))
        facts.set("torch.cuda_build", versions.get("cuda_build"))
        facts.set("torch.nccl_version", versions.get("nccl_version"))
    else:
        why = "the all-reduce child did not report torch's versions"
        facts.mark_all_unknown(("torch.version", "torch.cuda_build", "torch.nccl_version"), why)
    facts.set("system.hostname", member.host)
    return facts


def _named(gathered: Gathered, rank: int) -> str:
    """``rank 3, node gpu-07``: the node it said, else the one the launcher placed it on."""
    member = gathered.members.get(rank)
    node = member.host if member is not None else gathered.placement.node_of(rank)
    return f"rank {rank}, node {node}" if node else f"rank {rank} (on a node the launcher does not name)"


def suspects(gathered: Gathered, differing_hosts: list[str]) -> list[str]:
    """The nodes the findings point at, to leave out of the job (``srun --exclude``): a rank that
    did not join or stopped answering, an interface variable that selects nothing there, a node
    unlike the others, a node no other reaches, the rank whose all-reduce failed first."""
    found: list[str] = []
    for rank in gathered.missing:
        node = gathered.placement.node_of(rank)
        if node:
            found.append(node)
    members = _members(gathered)
    found += [m.host for m in members if m.lost or m.hello.get("ifname_problems")]
    found += differing_hosts
    for target in members:
        tried = [
            attempt
            for m in members
            if m is not target
            for attempt in m.reached or []
            if attempt.get("rank") == target.rank
        ]
        if len(members) > 2 and tried and not any(a.get("ok") for a in tried):
            found.append(target.host)  # nobody reaches it: the fault is on its side
    return sorted(dict.fromkeys(found))


def missing_ranks(gathered: Gathered) -> list[str]:
    deadline = f"{gathered.settings.deadline:g} s"
    out = [f"{_named(gathered, rank)}, did not join in {deadline}" for rank in gathered.missing]
    out += [f"{_named(gathered, m.rank)}, {m.lost}" for m in _members(gathered) if m.lost]
    return out


def _members(gathered: Gathered) -> list[Member]:
    return [gathered.members[rank] for rank in sorted(gathered.members)]


def differing(reports: list[SavedReport]) -> tuple[list[str], list[str], str | None]:
    """Each node that differs from the majority in what must match, field by field; the hosts
    to suspect (none when no configuration is the majority); the majority in words."""
    if len(reports) < 2:
        return [], [], None
    fleet = compare_fleet(reports)
    out = []
    for node in fleet.differing:
        fields = "; ".join(f"{d.label} {show(d.value)} (the others: {show(d.majority)})" for d in node.differences)
        out.append(f"{node.host}: {fields}")
    hosts = [] if fleet.majority_tied else [node.host for node in fleet.differing]
    majority = None
    if fleet.majority is not None:
        majority = f"{fleet.majority_count} of {len(reports)} nodes alike" + (
            " (a tie: no configuration is the majority)" if fleet.majority_tied else ""
        )
    return out, hosts, majority


def ifname_problems(gathered: Gathered) -> list[str]:
    return [f"{m.host}: {p}" for m in _members(gathered) for p in m.hello.get("ifname_problems") or []]


def listen_problems(gathered: Gathered) -> list[str]:
    return [f"{m.host}: {p}" for m in _members(gathered) for p in m.hello.get("listen_problems") or []]


def unreachable(gathered: Gathered) -> tuple[list[str], int]:
    """Each failing (from, to, port) pair with the interface, and the number of connections tried."""
    out: list[str] = []
    tried = 0
    for member in _members(gathered):
        iface = member.hello.get("interface") or "the route to rank 0"
        for attempt in member.reached or []:
            tried += 1
            if attempt.get("ok"):
                continue
            peer = gathered.members.get(int(attempt.get("rank", -1)))
            to = peer.host if peer else f"rank {attempt.get('rank')}"
            to_iface = (peer.hello.get("interface") if peer else None) or "?"
            out.append(
                f"{member.host} ({iface} {member.hello.get('address')}) -> {to} ({to_iface} "
                f"{attempt.get('address')}) port {attempt.get('port')}: {attempt.get('error')}"
            )
    return out, tried


def _allreduce_facts(gathered: Gathered, facts: Facts) -> None:
    prefix = "nodes.allreduce."
    facts.set(prefix + "backend", gathered.backend)
    if gathered.backend == "none":
        facts.set(prefix + "status", "skipped")
        return
    outcomes = [(rank, gathered.members[rank].allreduce) for rank in gathered.group]
    facts.set(prefix + "world_size", len(gathered.group))
    bad = [(rank, o) for rank, o in outcomes if o is None or o.status != "ok"]
    if bad:
        # the first rank that failed on its own is the cause; the others time out waiting for it
        failed = [(rank, o) for rank, o in bad if o is not None and o.status == "failed"] or bad
        rank, outcome = failed[0]
        why = outcome.error if outcome is not None else "it sent no result"
        others = len(bad) - 1
        more = f" ({others} other rank(s) did not finish either)" if others else ""
        facts.set(prefix + "status", "timeout" if outcome is not None and outcome.status == "timeout" else "failed")
        facts.set(prefix + "error", f"{_named(gathered, rank)}: {why}{more}")
        return
    results = [o.result for _rank, o in outcomes if o is not None]
    facts.set(prefix + "status", "ok")
    facts.set(prefix + "sum_ok", all(bool(r.get("sum_ok")) for r in results))
    slowest = min(results, key=lambda r: float(r.get("busbw_gbps") or 0.0))
    facts.set(prefix + "bytes", slowest.get("bytes"))
    facts.set(prefix + "algbw_gbps", round(float(slowest.get("algbw_gbps") or 0.0), 3))
    facts.set(prefix + "busbw_gbps", round(float(slowest.get("busbw_gbps") or 0.0), 3))
    facts.set(prefix + "device", slowest.get("device"))
    _expected(gathered, facts)


def _expected(gathered: Gathered, facts: Facts) -> None:
    """What the slowest job interface should give an all-reduce: its rate times the share a
    network all-reduce reaches (a published figure, not measured here)."""
    name = "nodes.allreduce.expected_busbw_gbps"
    if len(gathered.group) < 2:
        facts.mark_unknown(name, "one rank: an all-reduce of one rank moves nothing between nodes")
        return
    said = [gathered.members[rank].hello.get("speed_mbps") for rank in gathered.group]
    speeds = [s for s in said if isinstance(s, int) and not isinstance(s, bool) and s > 0]
    if len(speeds) < len(said):
        facts.mark_unknown(name, "a node's job interface does not say its link speed")
        return
    try:
        row = load_table(TABLE).get("network_fraction") or {}
        fraction = float(row["achievable_fraction"])
        source = str(row.get("source") or "")
    except (OSError, KeyError, TypeError, ValueError) as exc:
        facts.mark_unknown(name, f"no network row in rules/data/{TABLE}.toml: {exc}")
        return
    link_gbps = min(speeds) / 8000  # Mb/s to GB/s, one direction
    facts.set("nodes.allreduce.link_gbps", round(link_gbps, 3))
    facts.set(name, round(link_gbps * fraction, 3))
    facts.set("nodes.allreduce.half_expected_gbps", round(link_gbps * fraction / 2, 3))
    facts.set("nodes.allreduce.expected_source", source)


def nodes_facts(gathered: Gathered) -> tuple[Facts, list[SavedReport]]:
    """Rank 0's own facts with the ``nodes.*`` facts of the whole run, and each node's report."""
    reports = [
        SavedReport(f"rank {m.rank}", m.host, None, None, 1, node_facts(m).values, {}) for m in _members(gathered)
    ]
    facts = node_facts(gathered.members[0])
    placement = gathered.placement
    facts.set("nodes.launcher", placement.launcher)
    facts.set("nodes.world_size", placement.world_size)
    facts.set("nodes.joined", len(gathered.members))
    facts.set("nodes.hosts", [m.host for m in _members(gathered)])
    facts.set("nodes.deadline_s", gathered.settings.deadline)
    facts.set("nodes.missing", missing_ranks(gathered))
    found, differing_hosts, majority = differing(reports)
    facts.set("nodes.differing", found)
    if majority is not None:
        facts.set("nodes.majority", majority)
    facts.set("nodes.ifname_problems", ifname_problems(gathered))
    facts.set("nodes.listen_problems", listen_problems(gathered))
    pairs, tried = unreachable(gathered)
    facts.set("nodes.unreachable", pairs)
    facts.set("nodes.connections_tried", tried)
    ports = sorted({int(p) for m in _members(gathered) for p in m.hello.get("ports") or []})
    facts.set("nodes.ports", ports)
    _allreduce_facts(gathered, facts)
    facts.set("nodes.suspects", suspects(gathered, differing_hosts))
    facts.set("nodes.problems", list(gathered.problems))
    facts.set("nodes.seconds", round(time.monotonic() - gathered.started, 3))
    return facts, reports


def judge_nodes(
    facts: Facts, config: Config, select: Iterable[str] = (), ignore: Iterable[str] = (), host: str | None = None
) -> Report:
    """The rules CD851–CD869 on ``facts``, as one report of the ``nodes`` command."""
    rules = [rule for rule in load_rules(config.rules_dirs) if rule.id.startswith(RULE_PREFIXES)]
    results = judge(
        rules, facts, select=select, ignore=ignore, configured=(config.select, config.ignore),
        judgement=Judgement(config.severity),
    )  # fmt: skip
    report = Report(facts=facts, results=results, command="nodes")
    if host:
        report.host = host
    return report

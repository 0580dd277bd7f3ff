"""One run of ``cuda-doctor nodes``: rank 0 coordinates, every other rank follows.

Rank 0 listens on the meeting port; every rank connects (retrying until the deadline, rank 0 may
start later), says hello with its facts, then answers rank 0's requests in turn: try to reach the
other nodes, run its rank of the all-reduce, and end with the verdict's exit status.  Every wait
has a deadline; a rank that does not join or stops answering is named, never waited for."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cuda_doctor.nodes import wire
from cuda_doctor.nodes.allreduce import RankOutcome, run_rank
from cuda_doctor.nodes.local import Network, gather_facts, network
from cuda_doctor.nodes.placement import Placement
from cuda_doctor.nodes.reach import Listener, try_peers

#: Seconds between two attempts of a rank to reach rank 0 that is not listening yet.
RETRY = 0.5
#: Seconds added to a phase's own bound for the messages around it.
SLACK = 10.0


@dataclass(frozen=True)
class Settings:
    python: str
    env: Mapping[str, str]
    deadline: float  # seconds every rank has to join, from rank 0's start
    connect_timeout: float  # one TCP connect of the reachability test
    allreduce_timeout: float  # the all-reduce child, from its start to its result
    backend: str  # auto | gloo | nccl | none
    ports: tuple[int, ...]  # the ports each node listens on for the reachability test; () → meeting port + 1
    probe_timeout: float = 5.0
    size: int = 16 << 20
    log: Callable[[str], None] = field(default=lambda line: None, repr=False)


@dataclass
class Member:
    """What rank 0 knows of one rank."""

    rank: int
    hello: dict[str, Any]
    sock: socket.socket | None  # None for rank 0 itself
    reached: list[dict[str, Any]] | None = None
    allreduce: RankOutcome | None = None
    lost: str | None = None  # why it stopped answering after joining

    @property
    def host(self) -> str:
        return str(self.hello.get("host") or f"rank {self.rank}")


@dataclass
class Gathered:
    """Everything rank 0 learnt, for the verdict."""

    placement: Placement
    settings: Settings
    members: dict[int, Member]
    missing: list[int]
    backend: str
    group: list[int]  # the ranks of the all-reduce, in its rank order
    started: float
    problems: list[str] = field(default_factory=list)


def _hello(placement: Placement, settings: Settings) -> tuple[dict[str, Any], Network, Listener]:
    facts = gather_facts(settings.python, settings.env, settings.probe_timeout)
    hint = _backend_hint(settings, facts["values"].get("gpu.count"))  # which interface variable counts
    net = network(settings.env, hint, placement.master_host)
    ports = settings.ports or (placement.port + 1,)
    listener = Listener(net.job.address or "0.0.0.0", ports)
    hello = {
        "type": "hello",
        "rank": placement.rank,
        "host": os.uname().nodename,
        "facts": facts,
        "address": net.job.address,
        "interface": net.job.interface,
        "chosen_by": net.job.chosen_by,
        "ifname_problems": list(net.job.problems),
        "speed_mbps": net.speed_mbps(),
        "ports": listener.bound,
        "listen_problems": listener.problems,
    }
    return hello, net, listener


def _backend_hint(settings: Settings, gpu_count: Any) -> str:
    if settings.backend in ("gloo", "nccl"):
        return settings.backend
    return "nccl" if _has_gpus(gpu_count) else "gloo"


def _has_gpus(gpu_count: Any) -> bool:
    return isinstance(gpu_count, int) and not isinstance(gpu_count, bool) and gpu_count > 0


def _reach(hello: Mapping[str, Any], peers: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    targets = [(int(p["rank"]), str(p["address"]), [int(x) for x in p["ports"]]) for p in peers if p.get("address")]
    source = hello.get("address") or None
    return [a.__dict__ for a in try_peers(targets, timeout, source)]


def _run_allreduce(
    placement: Placement, settings: Settings, order: Mapping[str, Any], cancel: threading.Event | None = None
) -> RankOutcome:
    return run_rank(
        settings.python,
        settings.env,
        rank=int(order["group_rank"]),
        world_size=int(order["world_size"]),
        master=(str(order["master_addr"]), int(order["master_port"])),
        local_rank=placement.local_rank,
        backend=str(order["backend"]),
        timeout=float(order["timeout"]),
        size=settings.size,
        cancel=cancel,
    )


# -- rank 0 ------------------------------------------------------------------------------------------


def coordinate(placement: Placement, settings: Settings) -> Gathered:
    started = time.monotonic()
    join_by = started + settings.deadline
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("0.0.0.0", placement.port))
    except OSError as exc:
        server.close()
        raise OSError(f"cannot listen on port {placement.port}: {exc.strerror or exc}") from exc
    server.listen(max(placement.world_size, 16))
    arrived: dict[int, Member] = {}
    problems: list[str] = []
    lock = threading.Lock()
    acceptor = threading.Thread(
        target=_accept, args=(server, placement, join_by, arrived, problems, lock), name="nodes-accept", daemon=True
    )
    acceptor.start()
    listener: Listener | None = None
    try:
        hello, _net, listener = _hello(placement, settings)
        with lock:
            arrived[0] = Member(0, hello, None)
        settings.log(f"rank 0: listening on port {placement.port}, waiting for {placement.world_size - 1} rank(s)")
        while time.monotonic() < join_by:
            with lock:
                if len(arrived) >= placement.world_size:
                    break
            time.sleep(0.05)
        server.close()  # no rank joins late: it is named as missing instead
        acceptor.join(timeout=2)
        with lock:
            members = dict(arrived)
        missing = [rank for rank in range(placement.world_size) if rank not in members]
        gathered = Gathered(placement, settings, members, missing, "none", [], started, problems)
        _reach_phase(gathered)
        _allreduce_phase(gathered)
        return gathered
    finally:
        server.close()
        if listener is not None:
            listener.close()


def _accept(
    server: socket.socket,
    placement: Placement,
    join_by: float,
    arrived: dict[int, Member],
    problems: list[str],
    lock: threading.Lock,
) -> None:
    """Accept ranks until the deadline; each hello is read on a thread of its own, for at most
    twice as many connections as there are ranks (strangers on the port cannot make more)."""
    readers: list[threading.Thread] = []
    while time.monotonic() < join_by:
        try:
            server.settimeout(max(join_by - time.monotonic(), 0.01))
            conn, peer = server.accept()
        except OSError:  # the deadline, or the socket closed at the end of joining
            break
        if len(readers) >= 2 * placement.world_size + 8:
            conn.close()
            with lock:
                problems.append(f"a connection from {peer[0]} was refused: too many connections on the port")
            continue
        reader = threading.Thread(
            target=_read_hello, args=(conn, peer, placement, join_by, arrived, problems, lock), daemon=True
        )
        reader.start()
        readers.append(reader)
    for reader in readers:
        reader.join(timeout=max(join_by - time.monotonic(), 0) + 1)


def _read_hello(
    conn: socket.socket,
    peer: Any,
    placement: Placement,
    join_by: float,
    arrived: dict[int, Member],
    problems: list[str],
    lock: threading.Lock,
) -> None:
    try:
        hello = wire.receive(conn, join_by)
    except wire.WireError as exc:
        conn.close()
        with lock:
            problems.append(f"a connection from {peer[0]} sent no usable hello: {exc}")
        return
    claimed = hello.get("rank")
    facts = hello.get("facts")
    valid = (
        hello.get("type") == "hello"
        and isinstance(facts, dict)
        and isinstance(facts.get("values", {}), dict)
        and isinstance(facts.get("unknown", {}), dict)
    )
    rank = claimed if isinstance(claimed, int) and not isinstance(claimed, bool) else -1
    with lock:
        if not valid or not 0 < rank < placement.world_size or rank in arrived:
            problems.append(f"a connection from {peer[0]} claimed rank {claimed!r}, which is not free: ignored")
            conn.close()
            return
        assert isinstance(facts, dict)
        facts.setdefault("values", {})
        facts.setdefault("unknown", {})
        arrived[rank] = Member(rank, hello, conn)


def _members(gathered: Gathered) -> list[Member]:
    return [gathered.members[rank] for rank in sorted(gathered.members)]


def _ask_all(gathered: Gathered, make: Callable[[Member], dict[str, Any]], deadline: float) -> None:
    """Send each remote member its request; a send that fails loses the member."""
    for member in _members(gathered):
        if member.sock is None or member.lost:
            continue
        try:
            wire.send(member.sock, make(member), deadline)
        except wire.WireError as exc:
            member.lost = f"could not be sent a request: {exc}"


def _answers(gathered: Gathered, kind: str, deadline: float, phase: str) -> dict[int, dict[str, Any]]:
    """Each remote member's answer of type ``kind``, read in parallel, until ``deadline``."""
    out: dict[int, dict[str, Any]] = {}

    def keep(member: Member, answer: dict[str, Any]) -> None:
        out[member.rank] = answer

    for reader in _read_answers(gathered, kind, deadline, phase, keep):
        reader.join(timeout=max(deadline - time.monotonic(), 0) + 1)
    return out


def _read_answers(
    gathered: Gathered,
    kind: str,
    deadline: float,
    phase: str,
    on_answer: Callable[[Member, dict[str, Any]], None],
) -> list[threading.Thread]:
    """Read each remote member's answer of type ``kind`` on a thread of its own (started, returned)."""

    def read(member: Member) -> None:
        assert member.sock is not None
        try:
            answer = wire.receive(member.sock, deadline)
        except wire.WireError as exc:
            member.lost = f"stopped answering during {phase} ({exc})"
            return
        if answer.get("type") != kind:
            member.lost = f"answered {answer.get('type')!r} during {phase}"
            return
        on_answer(member, answer)

    threads = [
        threading.Thread(target=read, args=(m,), daemon=True) for m in _members(gathered) if m.sock and not m.lost
    ]
    for thread in threads:
        thread.start()
    return threads


def _peers(gathered: Gathered) -> list[dict[str, Any]]:
    return [
        {"rank": m.rank, "host": m.host, "address": m.hello.get("address"), "ports": m.hello.get("ports") or []}
        for m in _members(gathered)
        if not m.lost
    ]


def _reach_phase(gathered: Gathered) -> None:
    timeout = gathered.settings.connect_timeout
    peers = _peers(gathered)
    attempts = max(len(peers) * max(len(p["ports"]) for p in peers), 1) if peers else 1
    bound = timeout * (attempts // 32 + 1) + SLACK
    deadline = time.monotonic() + bound

    def request(member: Member) -> dict[str, Any]:
        others = [p for p in peers if p["rank"] != member.rank]
        return {"type": "reach", "peers": others, "timeout": timeout}

    _ask_all(gathered, request, deadline)
    zero = gathered.members[0]
    zero.reached = _reach(zero.hello, [p for p in peers if p["rank"] != 0], timeout)
    for rank, answer in _answers(gathered, "reached", deadline, "the connection tests").items():
        results = answer.get("results")
        gathered.members[rank].reached = results if isinstance(results, list) else []


def _choose_backend(gathered: Gathered) -> str:
    wanted = gathered.settings.backend
    if wanted != "auto":
        return wanted
    counts = [m.hello["facts"]["values"].get("gpu.count") for m in _members(gathered)]
    return "nccl" if all(_has_gpus(count) for count in counts) else "gloo"


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def _allreduce_phase(gathered: Gathered) -> None:
    gathered.backend = _choose_backend(gathered)
    if gathered.backend == "none":
        return
    group = [m.rank for m in _members(gathered) if not m.lost]
    gathered.group = group
    zero = gathered.members[0]
    address = str(zero.hello.get("address") or "127.0.0.1")
    try:
        port = _free_port(address)
    except OSError as exc:
        gathered.problems.append(f"no free port for the all-reduce's store on {address}: {exc.strerror or exc}")
        gathered.backend = "none"
        return
    timeout = gathered.settings.allreduce_timeout
    deadline = time.monotonic() + timeout + SLACK

    def order(member: Member) -> dict[str, Any]:
        return {
            "type": "allreduce", "group_rank": group.index(member.rank), "world_size": len(group),
            "master_addr": address, "master_port": port, "backend": gathered.backend, "timeout": timeout,
        }  # fmt: skip

    _ask_all(gathered, order, deadline)
    cancel = threading.Event()
    failed = threading.Event()  # a rank failed on its own: the others only wait for it, so they stop

    def own() -> None:
        zero.allreduce = _run_allreduce(gathered.placement, gathered.settings, order(zero), cancel)
        if zero.allreduce.status == "failed":
            failed.set()

    def answered(member: Member, answer: dict[str, Any]) -> None:
        outcome = answer.get("outcome")
        member.allreduce = RankOutcome.from_dict(outcome if isinstance(outcome, dict) else {})
        if member.allreduce.status == "failed":
            failed.set()

    runner = threading.Thread(target=own, name="nodes-allreduce", daemon=True)
    runner.start()
    readers = _read_answers(gathered, "allreduce_result", deadline, "the all-reduce", answered)
    while (runner.is_alive() or any(r.is_alive() for r in readers)) and time.monotonic() < deadline:
        if failed.wait(0.1):
            cancel.set()
            stop_by = time.monotonic() + SLACK
            for member in _members(gathered):
                if member.sock is not None and member.allreduce is None and not member.lost:
                    with contextlib.suppress(wire.WireError):  # gone: its own deadline ends it
                        wire.send(member.sock, {"type": "abort"}, stop_by)
            break
    runner.join(timeout=max(deadline - time.monotonic(), 0) + 1)
    for reader in readers:
        reader.join(timeout=max(deadline - time.monotonic(), 0) + 1)


def finish(gathered: Gathered, exit_code: int) -> None:
    """Tell every rank still there that the run is over, with its exit status; close every socket."""
    deadline = time.monotonic() + 5
    for member in _members(gathered):
        if member.sock is None:
            continue
        with contextlib.suppress(wire.WireError):  # gone already: it ends on its own deadline
            wire.send(member.sock, {"type": "done", "exit_code": exit_code}, deadline)
        member.sock.close()


# -- every other rank -------------------------------------------------------------------------------


def follow(placement: Placement, settings: Settings) -> tuple[int, str]:
    """Join rank 0 and answer it; returns (exit status, what happened in words)."""
    started = time.monotonic()
    join_by = started + settings.deadline
    hello, _net, listener = _hello(placement, settings)
    try:
        sock = _connect(placement, join_by)
        if isinstance(sock, str):
            return 2, sock
        with sock:
            wire.send(sock, hello, join_by)
            settings.log(f"rank {placement.rank}: joined rank 0 at {placement.master_host}:{placement.port}")
            # the longest rank 0 may keep us waiting: its deadline, the connection tests, the all-reduce
            patience = settings.deadline + settings.connect_timeout * 4 + settings.allreduce_timeout + 3 * SLACK
            while True:
                try:
                    message = wire.receive(sock, time.monotonic() + patience)
                except wire.WireError as exc:
                    return 2, f"rank 0 stopped answering: {exc}"
                kind = message.get("type")
                if kind == "done":
                    code = message.get("exit_code")
                    return (code if isinstance(code, int) else 2), "rank 0 gave the verdict"
                if kind == "abort":  # came after this rank's all-reduce had ended: nothing to stop
                    continue
                answer = _answer(placement, settings, hello, message, sock)
                if answer is None:
                    return 2, f"rank 0 sent a request this version does not know: {kind!r}"
                wire.send(sock, answer, time.monotonic() + SLACK)
    except wire.WireError as exc:
        return 2, f"lost rank 0: {exc}"
    finally:
        listener.close()


def _answer(
    placement: Placement,
    settings: Settings,
    hello: Mapping[str, Any],
    message: Mapping[str, Any],
    sock: socket.socket,
) -> dict[str, Any] | None:
    kind = message.get("type")
    if kind == "reach":
        peers = message.get("peers")
        timeout = float(message.get("timeout") or settings.connect_timeout)
        results = _reach(hello, peers if isinstance(peers, list) else [], timeout)
        return {"type": "reached", "results": results}
    if kind == "allreduce":
        outcome = _allreduce_until_abort(placement, settings, message, sock)
        return {"type": "allreduce_result", "outcome": outcome.to_dict()}
    return None


def _allreduce_until_abort(
    placement: Placement, settings: Settings, order: Mapping[str, Any], sock: socket.socket
) -> RankOutcome:
    """This rank's all-reduce, stopped early when rank 0 says another rank failed."""
    cancel = threading.Event()
    box: list[RankOutcome] = []

    def run() -> None:
        box.append(_run_allreduce(placement, settings, order, cancel))

    runner = threading.Thread(target=run, name="nodes-allreduce", daemon=True)
    runner.start()
    while runner.is_alive():
        readable, _, _ = select.select([sock], [], [], 0.2)
        if readable and not cancel.is_set():
            try:
                message = wire.receive(sock, time.monotonic() + SLACK)
            except wire.WireError:  # rank 0 is gone: nobody will read the result
                message = {"type": "abort"}
            if message.get("type") == "abort":
                cancel.set()
    runner.join()
    return box[0] if box else RankOutcome("failed", error="the all-reduce ended without an outcome")


def _connect(placement: Placement, join_by: float) -> socket.socket | str:
    """A connection to rank 0, retried until ``join_by``; else why not, in words."""
    last = "no attempt made"
    while time.monotonic() < join_by:
        try:
            infos = socket.getaddrinfo(placement.master_host, placement.port, socket.AF_INET, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            last = f"cannot resolve {placement.master_host}: {exc}"
            time.sleep(RETRY)
            continue
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(min(join_by - time.monotonic(), 5.0), 0.01))
            sock.connect(infos[0][4])
            return sock
        except OSError as exc:
            sock.close()
            last = exc.strerror or str(exc) or type(exc).__name__
        time.sleep(min(RETRY, max(join_by - time.monotonic(), 0)))
    return f"could not reach rank 0 at {placement.master_host}:{placement.port} in time: {last}"

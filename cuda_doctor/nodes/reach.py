"""Can every node reach every other on the job's interface and ports?  Each node listens on the
ports (a listener that accepts and closes), and tries a time-bounded TCP connect to each peer's."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

#: At most this many ports are listened on and tried per node (a range is a sample of the job's).
MAX_PORTS = 16
#: Connection attempts in flight at once on one node.
MAX_PARALLEL = 32


def parse_ports(text: str) -> tuple[int, ...]:
    """``29500-29503`` or ``29500,29510`` → the ports; ValueError with the reason otherwise."""
    ports: list[int] = []
    for part in text.split(","):
        part = part.strip()
        low_text, _, high_text = part.partition("-")
        if not low_text.isdigit() or (high_text and not high_text.isdigit()):
            raise ValueError(f"{part!r} is not a port or a range of ports (LOW-HIGH)")
        low, high = int(low_text), int(high_text or low_text)
        if not 0 < low <= high < 65536:
            raise ValueError(f"{part!r} is not within 1-65535, low to high")
        ports.extend(range(low, high + 1))
        if len(ports) > MAX_PORTS:
            raise ValueError(f"at most {MAX_PORTS} ports are tried per node; {text!r} names more")
    return tuple(dict.fromkeys(ports))


class Listener:
    """Listening sockets on ``address`` at ``ports`` (port 0: one the kernel chooses), accepting and
    closing every connection on a thread of its own until ``close``."""

    def __init__(self, address: str, ports: Sequence[int]) -> None:
        self.bound: list[int] = []
        self.problems: list[str] = []
        self._sockets: list[socket.socket] = []
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        for port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, port))
                sock.listen(64)
                sock.setblocking(False)
            except OSError as exc:
                sock.close()
                self.problems.append(f"cannot listen on {address}:{port}: {exc.strerror or exc}")
                continue
            self._sockets.append(sock)
            self.bound.append(int(sock.getsockname()[1]))
            self._selector.register(sock, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, name="reach-listener", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.2):
                with contextlib.suppress(OSError):  # a peer that gave up meanwhile
                    conn, _peer = key.fileobj.accept()  # type: ignore[union-attr]
                    conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for sock in self._sockets:
            self._selector.unregister(sock)
            sock.close()
        self._selector.close()


@dataclass(frozen=True)
class Attempt:
    rank: int  # the peer's
    address: str
    port: int
    ok: bool
    error: str | None
    seconds: float


def connect(address: str, port: int, timeout: float, source: str | None = None) -> tuple[bool, str | None, float]:
    """One TCP connect from ``source`` (the job's own address) within ``timeout`` s."""
    start = time.monotonic()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            if source:
                sock.bind((source, 0))
            sock.connect((address, port))
    except TimeoutError:
        return False, f"no answer in {timeout:g} s (dropped by a firewall?)", time.monotonic() - start
    except OSError as exc:
        return False, exc.strerror or str(exc), time.monotonic() - start
    return True, None, time.monotonic() - start


def try_peers(
    peers: Sequence[tuple[int, str, Sequence[int]]], timeout: float, source: str | None = None
) -> list[Attempt]:
    """Connect to every (rank, address, ports) peer at each of its ports, in parallel."""
    jobs = [(rank, address, port) for rank, address, ports in peers for port in ports]
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(jobs)), thread_name_prefix="reach") as pool:
        outcomes = list(pool.map(lambda job: connect(job[1], job[2], timeout, source), jobs))
    return [
        Attempt(rank, address, port, ok, error, round(seconds, 3))
        for (rank, address, port), (ok, error, seconds) in zip(jobs, outcomes, strict=True)
    ]

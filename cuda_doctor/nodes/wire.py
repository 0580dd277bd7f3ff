"""Messages between the ranks: a 4-byte big-endian length, then that many bytes of UTF-8 JSON (one
object).  Every read and write is bounded in size and time; a broken peer is a ``WireError``."""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

#: A message larger than this is refused unread: one node's fast facts are a few tens of KiB.
MAX_MESSAGE = 4 << 20
_HEADER = struct.Struct(">I")


class WireError(Exception):
    """The peer closed, sent something that is not a message, or did not answer in time."""


def send(sock: socket.socket, message: dict[str, Any], deadline: float) -> None:
    """Send one message, within ``deadline`` (a ``time.monotonic()`` instant)."""
    data = json.dumps(message, separators=(",", ":"), default=str).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise WireError(f"a message of {len(data)} bytes is larger than the {MAX_MESSAGE} allowed")
    _set_timeout(sock, deadline)
    try:
        sock.sendall(_HEADER.pack(len(data)) + data)
    except OSError as exc:
        raise WireError(_why(exc)) from exc


def receive(sock: socket.socket, deadline: float) -> dict[str, Any]:
    """One message, within ``deadline``; ``WireError`` on anything else."""
    (size,) = _HEADER.unpack(_exactly(sock, _HEADER.size, deadline))
    if size > MAX_MESSAGE:
        raise WireError(f"the peer announced a message of {size} bytes (at most {MAX_MESSAGE} are read)")
    try:
        value = json.loads(_exactly(sock, size, deadline).decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"the peer sent a message that is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise WireError("the peer sent JSON that is not an object")
    return value


def _exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < size:
        _set_timeout(sock, deadline)
        try:
            chunk = sock.recv(min(size - got, 1 << 16))
        except OSError as exc:
            raise WireError(_why(exc)) from exc
        if not chunk:
            raise WireError("the peer closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _set_timeout(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise WireError("no answer in time")
    sock.settimeout(left)


def _why(exc: OSError) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return "no answer in time"
    return exc.strerror or str(exc) or type(exc).__name__

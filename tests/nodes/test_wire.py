"""Length-prefixed JSON between ranks: bounded in size and time, a broken peer is a WireError."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from cuda_doctor.nodes import wire


def test_a_message_goes_through() -> None:
    left, right = socket.socketpair()
    with left, right:
        wire.send(left, {"type": "hello", "values": list(range(1000))}, time.monotonic() + 5)
        assert wire.receive(right, time.monotonic() + 5) == {"type": "hello", "values": list(range(1000))}


def test_an_announced_size_over_the_bound_is_refused_unread() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(struct.pack(">I", wire.MAX_MESSAGE + 1))
        with pytest.raises(wire.WireError, match="announced a message"):
            wire.receive(right, time.monotonic() + 5)


def test_a_message_too_large_to_send_is_refused() -> None:
    left, right = socket.socketpair()
    with left, right, pytest.raises(wire.WireError, match="larger"):
        wire.send(left, {"blob": "x" * wire.MAX_MESSAGE}, time.monotonic() + 5)


@pytest.mark.parametrize(("payload", "match"), [(b"not json", "not JSON"), (b"[1, 2]", "not an object")])
def test_what_is_not_an_object_is_refused(payload: bytes, match: str) -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(struct.pack(">I", len(payload)) + payload)
        with pytest.raises(wire.WireError, match=match):
            wire.receive(right, time.monotonic() + 5)


def test_a_silent_peer_ends_at_the_deadline() -> None:
    left, right = socket.socketpair()
    with left, right, pytest.raises(wire.WireError, match="in time"):
        wire.receive(right, time.monotonic() + 0.2)


def test_a_peer_that_closes_mid_message() -> None:
    left, right = socket.socketpair()
    with right:
        left.sendall(struct.pack(">I", 10) + b'{"a"')
        left.close()
        with pytest.raises(wire.WireError, match="closed"):
            wire.receive(right, time.monotonic() + 5)

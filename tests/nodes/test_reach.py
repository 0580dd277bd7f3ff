"""The connection tests: listeners that accept, connects bounded in time, port ranges."""

from __future__ import annotations

import socket

import pytest

from cuda_doctor.nodes.reach import MAX_PORTS, Listener, connect, parse_ports, try_peers


def test_port_ranges() -> None:
    assert parse_ports("29500-29502,29510") == (29500, 29501, 29502, 29510)
    for bad in ("0", "70000", "5-3", "a-b", f"1000-{1000 + MAX_PORTS}"):
        with pytest.raises(ValueError):
            parse_ports(bad)


def test_every_port_of_a_listener_answers_and_a_closed_one_is_named() -> None:
    listener = Listener("127.0.0.1", (0, 0))
    try:
        assert len(listener.bound) == 2 and not listener.problems
        with socket.socket() as probe:  # a port nobody listens on: bound, never listening
            probe.bind(("127.0.0.1", 0))
            closed = probe.getsockname()[1]
            attempts = try_peers([(1, "127.0.0.1", listener.bound), (2, "127.0.0.1", [closed])], 2.0, "127.0.0.1")
    finally:
        listener.close()
    assert [a.ok for a in attempts] == [True, True, False]
    assert attempts[2].rank == 2 and attempts[2].port == closed and "refused" in (attempts[2].error or "").lower()


def test_a_port_in_use_is_a_listen_problem() -> None:
    first = Listener("127.0.0.1", (0,))
    try:
        second = Listener("127.0.0.1", (first.bound[0],))
        second.close()
    finally:
        first.close()
    assert second.bound == [] and "cannot listen on 127.0.0.1:" in second.problems[0]


def test_a_connect_that_cannot_be_made_returns_the_reason() -> None:
    ok, error, _seconds = connect("127.0.0.1", 1, 1.0, source="192.0.2.123")  # not an address of this machine
    assert not ok and error

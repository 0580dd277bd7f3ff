"""Children left for a later phase, and children ending on their own: taken once, stopped or
waited for when the run ends."""

from __future__ import annotations

import os
import sys
import textwrap

from cuda_doctor.base import children
from cuda_doctor.base.handoff import Handoff
from cuda_doctor.base.process import CommandResult

ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


def source(body: str) -> str:
    return "import json, os, sys, time\n" + textwrap.dedent(body)


WAITER = source("""
    print(json.dumps({"started": True}), flush=True)
    sys.stdin.readline()
""")


def test_a_child_left_is_taken_once() -> None:
    handoff = Handoff()
    assert not handoff.accepting
    child = children.Child(sys.executable, WAITER, env=ENV, timeout=60, stdin=True)
    with handoff.open():
        assert handoff.accepting
        handoff.leave("torch", child)
        assert handoff.take("torch") is child
        assert handoff.take("torch") is None
    assert child.result is None  # taken: stopping it is the taker's job
    assert child.finish().returncode == 0


def test_a_child_left_and_not_taken_is_stopped_when_the_run_ends() -> None:
    handoff = Handoff()
    child = children.Child(sys.executable, WAITER, env=ENV, timeout=600, stdin=True)
    with handoff.open():
        handoff.leave("torch", child)
        child.wait_for(lambda record: True)
    result = child.result
    assert isinstance(result, CommandResult)
    assert result.returncode == 0  # it read the end of its stdin and exited on its own
    assert child.poll() == 0


SLOW_TO_END = source("""
    print(json.dumps({"started": True}), flush=True)
    print(json.dumps({"result": {"status": "ok"}}), flush=True)
    sys.stdin.readline()
    time.sleep(2)  # as a GPU process tearing its contexts down
""")


def test_a_child_let_end_goes_on_ending_while_the_run_goes_on_and_the_run_waits_for_it() -> None:
    handoff = Handoff()
    child = children.Child(sys.executable, SLOW_TO_END, env=ENV, timeout=600, stdin=True)
    with handoff.open():
        assert child.wait_for(lambda record: "result" in record) is not None
        handoff.let_end(child, grace=30)
        handoff.let_end(child, grace=30)  # once is enough: a second call changes nothing
        assert child.poll() is None  # not waited for here: still ending
    result = child.result
    assert isinstance(result, CommandResult)
    assert result.returncode == 0 and not result.timed_out  # it ended on its own, and was waited for
    assert [record for record in child.records() if "result" in record] == [{"result": {"status": "ok"}}]


def test_a_child_let_end_past_its_grace_is_killed() -> None:
    handoff = Handoff()
    child = children.Child(
        sys.executable, WAITER.replace("sys.stdin.readline()", "time.sleep(600)"), env=ENV, timeout=600, stdin=True
    )
    with handoff.open():
        child.wait_for(lambda record: True)
        handoff.let_end(child, grace=0.5)
    assert child.result is not None and child.result.timed_out
    assert child.poll() is not None


def test_a_child_let_end_outside_a_run_is_stopped_at_once() -> None:
    child = children.Child(sys.executable, WAITER, env=ENV, timeout=600, stdin=True)
    child.wait_for(lambda record: True)
    Handoff().let_end(child, grace=30)
    assert child.result is not None and child.result.returncode == 0

"""A framework child's report, ``{"values": {fact: value}, "unknown": {fact: reason}}``, the pipe
it is printed on, and the orders (smoke scripts) the child serves on stdin in the same process."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

#: The first line a child prints, before importing any framework: the interpreter runs.
STARTED = '{"started": true}'


def new_report() -> dict[str, dict[str, Any]]:
    return {"values": {}, "unknown": {}}


def put(report: dict[str, dict[str, Any]], name: str, value: Any) -> None:
    report["values"][name] = value
    report["unknown"].pop(name, None)


def miss(report: dict[str, dict[str, Any]], name: str, reason: str) -> None:
    if name not in report["values"]:
        report["unknown"][name] = reason


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return type(exc).__name__ + (": " + first if first else "")


def attempt(report: dict[str, dict[str, Any]], names: list[str], step: Callable[[], None]) -> None:
    """Run ``step``; if it fails, every name it was meant to set becomes unknown."""
    try:
        step()
    except BaseException as exc:  # a framework may raise anything, even SystemExit
        for name in names:
            miss(report, name, describe(exc))


def open_records() -> tuple[int, Callable[[dict[str, Any]], None]]:
    """Print ``STARTED``, then keep fd 1 for records alone (what frameworks print goes to stderr);
    returns the records' own fd and the function that prints a record."""
    os.write(1, (STARTED + "\n").encode("ascii"))
    records_fd = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(records_fd, "w", closefd=False)

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record, default=str) + "\n")
        out.flush()

    return records_fd, emit


def run_order(order: dict[str, Any], records_fd: int) -> bool:
    """Run the script of ``{"run": SOURCE, "argv": [ARG, …]}`` here, as ``python -c SOURCE ARG…``
    would, its stdout the records pipe; False for an order without a script."""
    source = order.get("run")
    if not isinstance(source, str):
        return False
    sys.stdout.flush()  # what the frameworks printed so far belongs on stderr
    os.dup2(records_fd, 1)
    sys.argv = ["-c", *[str(arg) for arg in order.get("argv", [])]]
    try:
        exec(compile(source, "<cuda-doctor>", "exec"), {"__name__": "__main__"})
    finally:
        sys.stdout.flush()
        os.dup2(2, 1)
    return True


def serve(answer: Callable[[dict[str, Any]], bool], first: Iterable[dict[str, Any]] = ()) -> int:
    """Answer ``first`` orders, then the parent's (a JSON object a line on stdin), while ``answer``
    returns True; returns the exit status: 1 when answering raised (traceback on stderr), else 0."""
    try:
        for order in first:
            if not answer(order):
                return 0
        while True:
            try:
                order = json.loads(sys.stdin.readline())
            except ValueError:  # stdin closed: the parent is done with this child
                return 0
            if not isinstance(order, dict) or not answer(order):
                return 0
    except BaseException:  # an order's script failed, even with a SystemExit
        traceback.print_exc()
        return 1


def end(status: int) -> None:
    """Exit without the interpreter's teardown, which can hang in a GPU framework."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)

"""The probes' shared input: a read-only context, changed only into a copy."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from cuda_doctor.core.probe import ProbeContext


def test_a_context_is_read_only_and_but_makes_a_changed_copy(tmp_path: Path) -> None:
    ctx = ProbeContext(root=tmp_path, env={"PATH": "/bin"}, timeout=2.0)
    with pytest.raises(AttributeError):
        ctx.timeout = 5.0
    later = ctx.but(timeout=5.0, fast=True)
    assert (later.timeout, later.fast, later.root, later.path) == (5.0, True, tmp_path, "/bin")
    assert (ctx.timeout, ctx.fast) == (2.0, False)
    assert later.handoff is ctx.handoff  # the children left for later are the run's, not the copy's


def test_defaults_are_made_per_context() -> None:
    one, two = ProbeContext(), ProbeContext()
    assert one.env is not two.env and one.handoff is not two.handoff
    assert one.root == Path("/")


def test_a_context_can_be_copied() -> None:
    ctx = ProbeContext(env={"PATH": "/bin"}, images=("a:1",))
    copied = copy.copy(ctx)
    assert (copied.env, copied.images, copied.handoff) == (ctx.env, ctx.images, ctx.handoff)
    assert "images=('a:1',)" in repr(copied) and "handoff" not in repr(copied)

"""The framework-level smoke script shares the GPU probe's tables through the child-side modules."""

from __future__ import annotations

import ast

from cuda_doctor.base.childside import clocks
from cuda_doctor.gpu.nvml import gpu_facts
from cuda_doctor.smoke import framework_level
from cuda_doctor.smoke.runner import script_source


def test_the_clock_event_reason_table_has_one_source() -> None:
    # smoke[i] and gpu[i] reasons are compared: both name every bit from the one table
    assert framework_level.CLOCK_EVENT_REASONS is clocks.CLOCK_EVENT_REASONS is gpu_facts.CLOCK_EVENT_REASONS
    # the script runs in the target interpreter, composed with that table (defined there once)
    tree = ast.parse(script_source("framework"))
    defined = [
        node
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "CLOCK_EVENT_REASONS"
    ]
    assert len(defined) == 1
    assert ast.literal_eval(defined[0].value) == gpu_facts.CLOCK_EVENT_REASONS

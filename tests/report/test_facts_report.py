"""`cuda-doctor facts` as text."""

from __future__ import annotations

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.report.facts import render_facts_text


@pytest.mark.parametrize("color", [False, True])
def test_brackets_are_shown_as_written(color: bool) -> None:
    facts = Facts()
    facts.set("driver.error", "cannot open [/dev/nvidiactl]")
    facts.mark_unknown("gpu", "NVML: [bold] is not a style")
    text = render_facts_text(facts, color=color)
    assert "cannot open [/dev/nvidiactl]" in text
    assert "unknown: NVML: [bold] is not a style" in text

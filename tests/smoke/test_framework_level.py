"""The framework-level smoke script: self-contained, so its copies of shared tables are checked here."""

from __future__ import annotations

from cuda_doctor.nvml import gpu_facts
from cuda_doctor.smoke import framework_level


def test_clock_event_reason_table_is_the_gpu_probes() -> None:
    # The script runs in the target interpreter and cannot import cuda_doctor: it keeps a copy,
    # which must name every bit as the GPU probe does (smoke[i] and gpu[i] reasons are compared).
    assert framework_level.CLOCK_EVENT_REASONS == gpu_facts.CLOCK_EVENT_REASONS

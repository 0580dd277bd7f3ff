"""What the NVML tests share: a probe context whose root is the test's own folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.core.probe import ProbeContext


@pytest.fixture
def ctx(tmp_path: Path) -> ProbeContext:
    return ProbeContext(root=tmp_path, env={"PATH": ""}, timeout=10.0)

"""A real Chromium for the browser-marked tests, found on PATH (``.ci/run`` installs Debian's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # chromium.py, next to the tests

import chromium


@pytest.fixture
def browser_binary() -> str:
    found = chromium.find()
    if found is None:
        pytest.skip(
            f"no Chromium found (looked for {', '.join(chromium.NAMES)} on PATH and $CUDA_DOCTOR_CHROMIUM); "
            "`apt-get install chromium` brings one"
        )
    return found

"""What every smoke script does alike: run from CONFIG (one JSON object) to its result, printing
records on stdout: ``{"started": true}``, ``{"step": …}`` before each step, ``{"result": {…}}``."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

HANG_VARIABLE = "CUDA_DOCTOR_SMOKE_TEST_HANG"  # test-only: sleep forever at the named step
#: The step running now, named in a failure.
CURRENT_STEP = [""]


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def step(name: str) -> None:
    CURRENT_STEP[0] = name
    emit({"step": name})
    hang = os.environ.get(HANG_VARIABLE, "")
    if hang and (name == hang or name.startswith(hang + " ")):
        while True:
            time.sleep(3600)


def error_text(exc: BaseException) -> str:
    """A failure in a few words: its type and its first three lines (not the advice that follows)."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()][:3]
    return f"{type(exc).__name__}: {' '.join(lines)}"[:1000]


def failed_result(exc: Exception) -> dict[str, Any]:
    return {"status": "failed", "error": error_text(exc), "devices": []}


def script_main(
    run: Callable[[dict[str, Any]], dict[str, Any] | None],
    failed: Callable[[Exception], dict[str, Any]] = failed_result,
) -> None:
    """The script's whole run: its first record, ``run`` on CONFIG (``sys.argv[1]``), its result
    (``failed``'s words for an exception; none when ``run`` returns None)."""
    emit({"started": True})
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else {}
    try:
        result = run(config)
    except Exception as exc:
        result = failed(exc)
    if result is not None:
        emit({"result": result})

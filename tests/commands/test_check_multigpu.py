"""`cuda-doctor check --fast` as a real process on eight GPUs (the fake NVML installed as
``pynvml``): the NVSwitch fabric and NVLink rules, and the driver calls each GPU costs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from tests.conftest import with_driver_library

TESTS = Path(__file__).resolve().parents[1]
FAKE_PYNVML = TESTS / "fakes" / "pynvml_h200"
#: What the fast check asks of each GPU with NVLinks (tests/nvml/test_field_values.py lists them).
FAST_CALLS_PER_GPU = 17


def fast_check(tmp_path: Path, **env: str) -> tuple[int, dict[str, Any]]:
    full = with_driver_library({**os.environ, "FAKE_PYNVML_GPUS": "8", **env}, tmp_path / "driver")
    full.pop("CUDA_DOCTOR_DISABLE_NVML", None)
    full["PYTHONPATH"] = os.pathsep.join([str(FAKE_PYNVML), str(TESTS.parent), full.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "check", "--fast", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=full,
        timeout=120,
        check=False,
    )
    return proc.returncode, json.loads(proc.stdout)


def by_rule(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["rule"]: r for r in report["results"]}


def test_eight_gpus_on_a_registered_fabric_with_every_link_up(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    _, report = fast_check(tmp_path, FAKE_PYNVML_FABRIC="completed", FAKE_PYNVML_LOG=str(log))
    results = by_rule(report)
    assert results["CD103"]["status"] == "pass" and "GPU 0–7" in results["CD103"]["message"]
    assert results["CD806"]["status"] == "pass" and "8 GPUs with 18 of 18 links up" in results["CD806"]["message"]
    assert results["CD807"]["status"] == "pass"
    calls = Counter(log.read_text().split())
    per_gpu = sum(n for name, n in calls.items() if name.startswith("nvmlDevice") and name != "nvmlDeviceGetCount")
    assert per_gpu / 8 <= FAST_CALLS_PER_GPU


def test_fabric_manager_not_running_fails_with_the_fix(tmp_path: Path) -> None:
    status, report = fast_check(tmp_path, FAKE_PYNVML_FABRIC="not_started")
    cd103 = by_rule(report)["CD103"]
    assert status == 1 and cd103["status"] == "fail"
    assert "GPU 0–7" in cd103["message"] and "error 802" in cd103["message"]
    assert "sudo systemctl enable --now nvidia-fabricmanager" in cd103["commands"]
    assert "nvidia-fabricmanager-580" in cd103["fix"] and "580.159.04" in cd103["fix"]


def test_links_down_on_one_gpu_of_the_fabric_fail_naming_it(tmp_path: Path) -> None:
    status, report = fast_check(tmp_path, FAKE_PYNVML_FABRIC="completed", FAKE_PYNVML_NVLINKS_DOWN="5:4,5:9")
    cd806 = by_rule(report)["CD806"]
    assert status == 1 and cd806["status"] == "fail"
    assert cd806["message"] == (
        "NVLinks down: GPU 5: links 4 and 9 down while its other 16 are up"
        " (an NVIDIA H200 on an NVSwitch fabric has 18)"
    )


def test_without_a_fabric_the_same_links_down_are_a_warning_beside_the_siblings(tmp_path: Path) -> None:
    _, report = fast_check(tmp_path, FAKE_PYNVML_NVLINKS_DOWN="5:4,5:9")
    results = by_rule(report)
    assert results["CD103"]["status"] == "skipped"
    assert results["CD806"]["status"] == "warn" and "GPU 5 has 16 of 18 links up" in results["CD806"]["message"]

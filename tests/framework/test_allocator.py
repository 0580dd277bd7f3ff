"""Allocator settings torch rejects: torch's own parser asked in the child, the key it names, the
nearest known key and the corrected ``export`` line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cuda_doctor.base import children
from cuda_doctor.base.childside import allocator as childside
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework import _child as child
from cuda_doctor.framework import allocator
from cuda_doctor.framework.probe import PROBE, allocator_keys

#: What torch 2.9+ (CUDA build) raised on the H200 at the first CUDA allocation.
H200_ERROR = "Unrecognized key 'expandable_segment' in CUDA allocator config."


class FakeCudaTorch:
    """A CUDA build's parser of the settings: it rejects the keys it does not know, as torch does."""

    cuda: Any = None

    def __init__(self, known: set[str], name: str = "_accelerator_setAllocatorSettings") -> None:
        self.parsed: list[str] = []
        self.known = known
        self.version = SimpleNamespace(cuda="12.8")
        self.__version__ = "2.9.1+cu128"
        self._C = SimpleNamespace(**{name: self.parse})

    def parse(self, text: str) -> None:
        self.parsed.append(text)
        for item in allocator.split_settings(text):
            key = item.partition(":")[0]
            if key not in self.known:
                raise ValueError(f"Unrecognized key '{key}' in CUDA allocator config.")


def test_the_h200_typo_is_named_by_torchs_own_parser() -> None:
    torch = FakeCudaTorch({"expandable_segments"})
    answer = childside.check_settings(torch, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True", "HOME": "/x"})
    assert answer == {
        "variables": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"},
        "parser": "_accelerator_setAllocatorSettings",
        "variable": "PYTORCH_CUDA_ALLOC_CONF",
        "error": f"ValueError: {H200_ERROR}",
        "warnings": [],
    }
    assert childside.rejection(answer) == (
        f"torch rejects PYTORCH_CUDA_ALLOC_CONF=expandable_segment:True: ValueError: {H200_ERROR}"
    )


def test_the_cuda_allocators_own_choice_is_parsed_last() -> None:
    # the settings end as the environment sets them: the smoke run that follows uses them
    old_parser = "_cuda_cudaCachingAllocator_set_allocator_settings"  # torch before 2.9
    torch = FakeCudaTorch({"expandable_segments", "max_split_size_mb"}, old_parser)
    env = {"PYTORCH_ALLOC_CONF": "max_split_size_mb:128", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    answer = childside.check_settings(torch, env)
    assert answer["error"] is None and answer["parser"] == "_cuda_cudaCachingAllocator_set_allocator_settings"
    assert torch.parsed == ["max_split_size_mb:128", "expandable_segments:True"]


def test_nothing_set_asks_nothing() -> None:
    torch = FakeCudaTorch(set())
    assert childside.check_settings(torch, {})["error"] is None
    assert torch.parsed == []


def _report_after(torch: Any, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    for name in childside.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    report = child.new_report()
    child.put(report, "torch.cuda_build", torch.version.cuda)
    child.torch_allocator(report, torch)
    return report


def test_the_child_does_not_start_cuda_for_settings_torch_rejects(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = FakeCudaTorch({"expandable_segments"})
    report = _report_after(torch, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"}, monkeypatch)
    assert report["values"]["torch.alloc_conf_error"] == f"ValueError: {H200_ERROR}"
    assert report["values"]["torch.alloc_conf_variable"] == "PYTORCH_CUDA_ALLOC_CONF"

    def started() -> None:
        raise AssertionError("CUDA was started")

    torch.cuda = SimpleNamespace(device_count=lambda: 1, get_device_capability=started, get_device_name=started)
    child.put(report, "torch.cuda_available", True)
    child.torch_devices(report, torch)
    assert report["values"]["torch.device_count"] == 1
    assert report["unknown"]["torch.device_capabilities"].startswith("CUDA was not started: torch rejects")


def test_a_cpu_build_cannot_judge_cuda_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = FakeCudaTorch(set())
    torch.version = SimpleNamespace(cuda=None)
    report = _report_after(torch, {"PYTORCH_ALLOC_CONF": "x:1"}, monkeypatch)
    assert report["values"]["torch.alloc_conf"] == {"PYTORCH_ALLOC_CONF": "x:1"}
    assert report["unknown"]["torch.alloc_conf_error"] == "this torch has no CUDA allocator to read the settings"


# -- the correction ---------------------------------------------------------------------------------
def test_torchs_words_for_a_bad_key() -> None:
    assert allocator.bad_key(f"ValueError: {H200_ERROR}") == "expandable_segment"
    assert allocator.bad_key("RuntimeError: Unrecognized CachingAllocator option: max_split_mb") == "max_split_mb"
    assert allocator.bad_key("ValueError: Expected 'True' or 'False' at index 2 but got 'Yes'") is None


def test_a_list_value_keeps_its_commas() -> None:
    value = "roundup_power2_divisions:[256:1,>:4],expandable_segment:True"
    assert allocator.split_settings(value) == ["roundup_power2_divisions:[256:1,>:4]", "expandable_segment:True"]
    keys = allocator_keys()
    assert allocator.corrected(value, "expandable_segment", keys) == (
        "expandable_segments",
        "roundup_power2_divisions:[256:1,>:4],expandable_segments:True",
    )
    assert allocator.corrected("flux:1,max_split_size_mb:128", "flux", keys) == (None, "max_split_size_mb:128")
    # the brackets and ">" are quoted for the shell; a bare value needs nothing
    assert allocator.export_line("PYTORCH_ALLOC_CONF", "roundup_power2_divisions:[256:1,>:4]") == (
        "export PYTORCH_ALLOC_CONF='roundup_power2_divisions:[256:1,>:4]'"
    )
    assert allocator.export_line("PYTORCH_ALLOC_CONF", "") == "unset PYTORCH_ALLOC_CONF"


def _facts(**values: Any) -> Facts:
    facts = Facts()
    for name, value in values.items():
        facts.set(f"torch.{name}", value)
    return facts


def test_the_fix_for_the_h200_typo() -> None:
    facts = _facts(
        alloc_conf={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"},
        alloc_conf_variable="PYTORCH_CUDA_ALLOC_CONF",
        alloc_conf_error=f"ValueError: {H200_ERROR}",
    )
    allocator.add_fix(facts, allocator_keys())
    assert facts.get("torch.alloc_conf_bad_key") == "expandable_segment"
    assert facts.get("torch.alloc_conf_suggestion") == "expandable_segments"
    assert facts.get("torch.alloc_conf_fix") == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def test_no_fix_without_a_key_to_correct() -> None:
    accepted = _facts(alloc_conf={}, alloc_conf_variable=None, alloc_conf_error=None)
    allocator.add_fix(accepted, allocator_keys())
    assert accepted.reason("torch.alloc_conf_fix") == "torch accepts the allocator settings"
    value = _facts(
        alloc_conf={"PYTORCH_ALLOC_CONF": "expandable_segments:Yes"},
        alloc_conf_variable="PYTORCH_ALLOC_CONF",
        alloc_conf_error="ValueError: Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'Yes'",
    )
    allocator.add_fix(value, allocator_keys())
    assert value.reason("torch.alloc_conf_bad_key") == "torch's error names no unknown key to correct"
    unasked = Facts()
    unasked.mark_unknown("torch.alloc_conf_error", "import torch failed: x")
    allocator.add_fix(unasked, allocator_keys())
    assert unasked.reason("torch.alloc_conf_fix") == "import torch failed: x"


# -- a real torch ------------------------------------------------------------------------------------
def _ask(python: Path, env: dict[str, str]) -> dict[str, Any]:
    """The child-side check, composed as a child runs it, in ``python`` with ``env``."""
    source = children.compose(Path(childside.__file__))
    source += "import json, os, torch\nprint(json.dumps(check_settings(torch, os.environ)))\n"
    done = subprocess.run([str(python), "-c", source], env=env, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_real_torch_parses_the_settings(torch_cpu_python: Path, base_env: dict[str, str]) -> None:
    bad_value = _ask(torch_cpu_python, {**base_env, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:Yes"})
    assert bad_value["parser"] == "_accelerator_setAllocatorSettings"
    assert bad_value["error"] == "ValueError: Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'Yes'"
    # torch 2.13's CPU build has no CUDA allocator, whose parser alone knows the CUDA keys: it lets a
    # typo pass, so the child leaves a CPU build's verdict unknown
    typo = _ask(torch_cpu_python, {**base_env, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"})
    assert typo["error"] is None


@pytest.mark.slow
def test_the_framework_probe_reports_the_settings(torch_cpu_python: Path, base_env: dict[str, str]) -> None:
    env = {**base_env, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"}
    facts = PROBE.collect(ProbeContext(python=str(torch_cpu_python), env=env))
    assert facts.get("torch.alloc_conf") == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"}
    assert facts.reason("torch.alloc_conf_error") == "this torch has no CUDA allocator to read the settings"
    assert facts.reason("torch.alloc_conf_fix") == "this torch has no CUDA allocator to read the settings"

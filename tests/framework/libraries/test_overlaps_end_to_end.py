"""A wheel of another CUDA family unpacked over the pinned wheel's files, end to end with the real
RECORDs of nvidia-nccl-cu13 (torch 2.13.0's pin) and nvidia-nccl-cu12: both list
nvidia/nccl/lib/libnccl.so.2, pip check sees nothing, and uninstalling the cu12 wheel deletes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.core.rules import judge_rule, load_rules
from cuda_doctor.framework.probe import PROBE
from tests.framework.libraries.conftest import record_only, wheel_record

RULES = {rule.id: rule for rule in load_rules()}


def test_the_fix_installs_the_pinned_wheel_again(
    plain_python: Path, cuda13_site: Path, registry: Any, base_env: dict[str, str]
) -> None:
    record_only(cuda13_site, *wheel_record(registry, "nvidia-nccl-cu13", "2.29.7"), "nvidia-nccl-cu13", "2.29.7")
    record_only(cuda13_site, *wheel_record(registry, "nvidia-nccl-cu12", "2.27.5"), "nvidia-nccl-cu12", "2.27.5")
    facts = PROBE.collect(ProbeContext(python=str(plain_python), env={**base_env, "PYTHONPATH": str(cuda13_site)}))
    assert derive_all(facts) == []
    v = facts.values
    by_name = {v[f"dist[{i}].name"]: i for i in facts.indices("dist")}
    assert v[f"dist[{by_name['nvidia-nccl-cu13']}].shares_files"] == [
        {"name": "nvidia-nccl-cu12", "files": ["nvidia/nccl/lib/libnccl.so.2"], "count": 1}
    ]
    assert v[f"dist[{by_name['nvidia-cuda-runtime']}].shares_files"] == []
    [result] = judge_rule(RULES["CD214"], facts)
    assert result.status.value == "warn"
    assert "nvidia-nccl-cu12 lists libnccl.so.2 of nvidia-nccl-cu13" in result.message
    python = str(v["framework.pip"])
    assert result.commands == (
        f"{python} show nvidia-nccl-cu12",
        f"{python} uninstall -y nvidia-nccl-cu12",
        f"{python} install --force-reinstall --no-deps 'nvidia-nccl-cu13==2.29.7'",
    )

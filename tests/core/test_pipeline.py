"""The probing half of the pipeline: probes run side by side, each under an outer deadline."""

from __future__ import annotations

import time
from pathlib import Path

from cuda_doctor.container.docker import MAX_DISCOVERED, DockerProbe
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import collect
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.framework.probe import FrameworkProbe
from cuda_doctor.nccl.probe import NcclProbe
from cuda_doctor.smoke.probe import SmokeProbe


class SlowProbe:
    """Takes ``seconds``; says it may take ``limit`` (None: the pipeline's default)."""

    def __init__(self, name: str, seconds: float, limit: float | None = None) -> None:
        self.name = name
        self.seconds = seconds
        if limit is not None:
            self.deadline = lambda ctx: limit

    def applies(self, ctx: ProbeContext) -> bool:
        return True

    def collect(self, ctx: ProbeContext) -> Facts:
        time.sleep(self.seconds)
        facts = Facts()
        facts.set(f"{self.name}.done", True)
        return facts


def test_a_probe_is_abandoned_at_its_own_deadline(tmp_path: Path) -> None:
    ctx = ProbeContext(root=tmp_path, env={}, timeout=10)
    facts = collect(ctx, [SlowProbe("slow", 30, limit=0.3), SlowProbe("quick", 0.01)])
    assert facts.get("probe.slow.status") == "timeout"  # the default, 3 × 10 + 5 s, would have waited
    assert facts.reason("slow.done") == "the slow probe did not finish in time"
    assert facts.get("quick.done") is True


def test_a_probe_may_take_longer_than_the_default_when_it_says_so(tmp_path: Path) -> None:
    ctx = ProbeContext(root=tmp_path, env={}, timeout=0.01)  # default outer limit: 5.03 s
    facts = collect(ctx, [SlowProbe("long", 5.5, limit=20)])
    assert facts.get("probe.long.status") == "ok"


def test_deadlines_cover_the_probes_own_limits(tmp_path: Path) -> None:
    ctx = ProbeContext(root=tmp_path, env={}, timeout=10, smoke_timeout=30)
    framework = FrameworkProbe(min_timeout=200)
    assert framework.deadline(ctx) > framework.timeout(ctx) == 200
    assert SmokeProbe().deadline(ctx) > ctx.smoke_timeout
    # two NVML calls and nvidia-smi topo (10 s each), then the ranks' own 30 + 60 s
    assert NcclProbe().deadline(ctx) > 3 * 10 + 30 + 60
    docker = DockerProbe()
    plain = docker.deadline(ctx)
    assert plain > (3 + MAX_DISCOVERED) * (10 + 2)  # connect, info, listing, each inspection
    with_images = docker.deadline(ctx.but(images=("a:1", "b:2")))
    assert with_images > plain
    # --run-image: create, start, wait, logs and remove within smoke_timeout each, per image
    assert docker.deadline(ctx.but(images=("a:1",), run_images=True)) > (1 + MAX_DISCOVERED) * 5 * 30


def test_fast_runs_docker_only_when_images_are_named(tmp_path: Path) -> None:
    from cuda_doctor.core.pipeline import gather

    env = {"PATH": str(tmp_path), "CUDA_DOCTOR_DISABLE_NVML": "1", "DOCKER_HOST": f"unix://{tmp_path}/no.sock"}
    plain = gather(ProbeContext(root=tmp_path, env=env, fast=True, timeout=2))
    assert plain.get("probe.docker.status") == "skipped" and plain.get("probe.docker.reason") == "--fast"
    asked = gather(ProbeContext(root=tmp_path, env=env, fast=True, timeout=2, images=("nvidia/cuda:12.4.1-base",)))
    assert asked.get("probe.docker.status") == "ok"  # the probe ran (and found no engine)
    assert asked.get("image[0].ref") == "nvidia/cuda:12.4.1-base"
    assert asked.get("probe.framework.status") == "skipped"  # still no framework import


def test_a_report_saved_without_newer_facts_skips_their_checks(tmp_path: Path) -> None:
    import json

    from cuda_doctor.core.config import Config
    from cuda_doctor.core.pipeline import rejudge

    base = json.loads((Path(__file__).parents[1] / "rules" / "h200_facts.json").read_text())
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**base, "values": {**base["values"], "probe.framework.status": "ok"}}))
    results = {r.rule_id: r for r in rejudge(old, Config()).results}
    assert results["CD231"].status.value == "skipped"  # that cuda-doctor's framework probe did not scan
    assert results["CD231"].message == "not in this report: it was saved without these facts"
    assert results["CD214"].status.value == "skipped"  # nor the framework child's pin facts
    timed_out = tmp_path / "timed_out.json"
    values = {**base["values"], "probe.framework.status": "timeout"}
    timed_out.write_text(
        json.dumps({**base, "values": values, "unknown": {"framework": "the framework probe did not finish"}})
    )
    again = {r.rule_id: r for r in rejudge(timed_out, Config()).results}
    assert again["CD231"].status.value == "unknown"  # a probe that ran and failed: could not check

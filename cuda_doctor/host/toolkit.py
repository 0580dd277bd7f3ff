"""The system CUDA toolkit: which ``nvcc`` a build would use, and its release (a missing ``nvcc``
is a plain fact: only compiling extensions needs it)."""

from __future__ import annotations

import os
import re

from cuda_doctor.base.process import run_command, which
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

_VERSIONS = ("toolkit.nvcc_version", "toolkit.nvcc_full_version")
_RELEASE = re.compile(r"release (?P<release>\d+\.\d+), V(?P<full>\d+(?:\.\d+)*)")


class ToolkitProbe:
    name = "toolkit"

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast  # --fast is NVML, nvidia-smi, environment and container only

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        nvcc = find_nvcc(ctx)
        facts.set("toolkit.nvcc_path", nvcc)
        if nvcc is None:
            for name in _VERSIONS:
                facts.set(name, None)
            return facts
        result = run_command([nvcc, "--version"], timeout=ctx.timeout, env=ctx.env)
        parsed = parse_nvcc_version(result.stdout) if result.ok else None
        if parsed is None:
            reason = f"no 'release X.Y, VX.Y.Z' in the output of {nvcc} --version"
            facts.mark_all_unknown(_VERSIONS, reason if result.ok else result.error or f"{nvcc} --version failed")
            return facts
        facts.set("toolkit.nvcc_version", parsed[0])
        facts.set("toolkit.nvcc_full_version", parsed[1])
        return facts


def find_nvcc(ctx: ProbeContext) -> str | None:
    """nvcc on PATH (what a shell build runs), else where torch.utils.cpp_extension looks."""
    on_path = which("nvcc", ctx.path)
    if on_path is not None:
        return on_path
    homes = [home for home in (ctx.env.get("CUDA_HOME"), ctx.env.get("CUDA_PATH")) if home]
    candidates = [os.path.join(home, "bin", "nvcc") for home in homes]
    candidates.append(str(ctx.file("/usr/local/cuda/bin/nvcc")))
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def parse_nvcc_version(text: str) -> tuple[str, str] | None:
    """``... release 13.0, V13.0.88`` → ``("13.0", "13.0.88")``."""
    match = _RELEASE.search(text)
    return (match.group("release"), match.group("full")) if match else None


PROBE = ToolkitProbe()

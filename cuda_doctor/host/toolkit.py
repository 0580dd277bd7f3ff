"""The system CUDA toolkit: which ``nvcc`` a build would use, and its release.

Framework wheels bring their own CUDA runtime, so the toolkit matters only for compiling
extensions; a missing ``nvcc`` is therefore a plain fact (``toolkit.nvcc_path = None``),
not an error.
"""

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
        # --fast is NVML, nvidia-smi, environment and container only
        return not ctx.fast

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        nvcc = find_nvcc(ctx)
        facts.set("toolkit.nvcc_path", nvcc)
        if nvcc is None:
            facts.set("toolkit.nvcc_version", None)
            facts.set("toolkit.nvcc_full_version", None)
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
    """nvcc on PATH (what a shell build runs), else under ``$CUDA_HOME``/``$CUDA_PATH``,
    else ``/usr/local/cuda``, the last places torch.utils.cpp_extension looks.

    Paths from the environment name the real file system; the default goes through
    ``ctx.root`` like every other fixed path.
    """
    on_path = which("nvcc", ctx.path)
    if on_path is not None:
        return on_path
    homes = [ctx.env.get("CUDA_HOME"), ctx.env.get("CUDA_PATH")]
    for home in homes:
        if home:
            candidate = os.path.join(home, "bin", "nvcc")
            if os.access(candidate, os.X_OK):
                return candidate
    default = ctx.file("/usr/local/cuda/bin/nvcc")
    if os.access(default, os.X_OK):
        return str(default)
    return None


def parse_nvcc_version(text: str) -> tuple[str, str] | None:
    """``... release 13.0, V13.0.88`` → ``("13.0", "13.0.88")``."""
    match = _RELEASE.search(text)
    if match is None:
        return None
    return match.group("release"), match.group("full")


PROBE = ToolkitProbe()

"""The programs slurm.conf names (paths, run with no arguments and no PATH): shell scripts that
run this installation's interpreter on ``cuda-doctor slurm …``."""

from __future__ import annotations

import shlex
import sys

HOOKS = {
    "health-check": "Slurm HealthCheckProgram: drains this node when cuda-doctor's fast check fails and\n"
    "# undrains it once the check passes again (only when cuda-doctor had drained it).",
    "prolog": "Slurm Prolog: cuda-doctor's fast check before each job; on a failure the node is\n"
    "# drained and the exit status fails the job start (Slurm requeues the job).",
}
#: slurmd gives its programs an empty environment (SLURMD_NODENAME and a few job variables).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def hook_script(kind: str, python: str | None = None) -> str:
    exe = shlex.quote(python or sys.executable)
    return (
        "#!/bin/sh\n"
        f"# {HOOKS[kind]}\n"
        f"# Written by `cuda-doctor slurm script {kind}`; options may be added to the exec line.\n"
        f'PATH="${{PATH:-{DEFAULT_PATH}}}"\n'
        "export PATH\n"
        f'exec {exe} -m cuda_doctor slurm {kind} "$@"\n'
    )

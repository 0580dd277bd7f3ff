"""One module per sub-command, each with a click command named ``command``.

COMMANDS maps command names to modules, imported only when their command runs.
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "check": "cuda_doctor.commands.check",
    "facts": "cuda_doctor.commands.facts",
    "rules": "cuda_doctor.commands.rules",
    "explain": "cuda_doctor.commands.explain",
    "diff": "cuda_doctor.commands.diff",
    "fleet": "cuda_doctor.commands.fleet",
    "watch": "cuda_doctor.commands.watch",
    "exec": "cuda_doctor.commands.exec_",
    "smoke": "cuda_doctor.commands.smoke",
    "lint": "cuda_doctor.commands.lint",
    "slurm": "cuda_doctor.commands.slurm",
}

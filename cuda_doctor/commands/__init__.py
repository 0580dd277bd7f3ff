"""One module per sub-command; each exposes a click command named ``command``.

COMMANDS is the one explicit registry: command name → module path.  Modules are imported
only when their command runs, so ``cuda-doctor check --fast`` does not pay for the imports
of ``lint``, ``watch`` or the Docker SDK.  To add a command, add one line here.
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

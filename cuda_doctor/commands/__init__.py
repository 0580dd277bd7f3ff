"""One module per sub-command, each with a click command named ``command``, imported only when it runs."""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    name: f"cuda_doctor.commands.{'exec_' if name == 'exec' else name}"  # exec_: not the builtin's name
    for name in (
        *("check", "facts", "rules", "explain", "diff", "fleet", "watch", "exec", "smoke", "lint", "slurm"),
        "nodes",
    )
}

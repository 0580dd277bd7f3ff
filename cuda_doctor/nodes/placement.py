"""Where this task stands in the job: its rank, the number of ranks, rank 0's address and the port
the ranks meet on, read from the launcher's environment (Slurm's srun, torchrun, Open MPI's mpirun)
or given as options, which win."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cuda_doctor.base.errors import UserError

#: The port the ranks meet on when neither an option nor the launcher names one.  torchrun's own
#: MASTER_PORT is taken by its store, so the coordinator never uses it (it takes the next one).
DEFAULT_PORT = 29431
#: A Slurm host list expands to at most this many names (a bound on hostile input).
MAX_HOSTS = 65536
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class Placement:
    rank: int
    world_size: int
    master_host: str
    port: int
    local_rank: int
    launcher: str  # "slurm", "torchrun", "mpirun" or "options"
    nodes: tuple[str, ...] = ()  # the job's nodes in launch order, where the launcher says (Slurm)

    def node_of(self, rank: int) -> str | None:
        """The node rank ``rank`` was placed on, where the launcher tells (one task per node)."""
        if len(self.nodes) == self.world_size and 0 <= rank < len(self.nodes):
            return self.nodes[rank]
        return None


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list: ``gpu-[01-03,07],login1`` → gpu-01, gpu-02, gpu-03, gpu-07, login1."""
    names: list[str] = []
    for item in _top_level_items(text.strip()):
        for name in _expand_one(item):
            names.append(name)
            if len(names) > MAX_HOSTS:
                raise UserError(f"the Slurm node list names more than {MAX_HOSTS} nodes")
    return names


def _top_level_items(text: str) -> list[str]:
    items: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item for item in items if item]


def _expand_one(item: str) -> list[str]:
    start = item.find("[")
    if start < 0:
        return [item]
    end = item.find("]", start)
    if end < 0:
        raise UserError(f"cannot read the Slurm node list entry {item!r}: a '[' is not closed")
    head, body, tail = item[:start], item[start + 1 : end], item[end + 1 :]
    out: list[str] = []
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise UserError(f"cannot read the Slurm node list entry {item!r}: {part!r} is not a number or range")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) - int(low) > MAX_HOSTS:
            raise UserError(f"the Slurm node list range {part!r} is too large")
        width = len(low) if low.startswith("0") else 0
        for number in range(int(low), int(high) + 1):
            for rest in _expand_one(tail):
                out.append(f"{head}{number:0{width}d}{rest}")
                if len(out) > MAX_HOSTS:
                    raise UserError(f"the Slurm node list names more than {MAX_HOSTS} nodes")
    return out


def _number(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise UserError(f"{name}={value!r} is not a whole number")
    return int(value)


def split_endpoint(text: str) -> tuple[str, int | None]:
    """``host:port``, ``host``, ``:port``, ``[v6]:port`` → (host, or "" for the launcher's; port or None)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host and not port_text:
        raise UserError(f"--master {text!r} names neither a host nor a port (write HOST:PORT or :PORT)")
    if not port_text:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UserError(f"--master {text!r}: {port_text!r} is not a port (1-65535)")
    return host, int(port_text)


def place(
    env: Mapping[str, str],
    *,
    rank: int | None = None,
    world_size: int | None = None,
    master: str | None = None,
) -> Placement:
    """This task's placement from the options, else the launcher's environment; a ``UserError``
    names what is missing."""
    launcher, found_rank, found_world, host, port, local_rank, nodes = _from_launcher(env)
    if rank is not None or world_size is not None or master is not None:
        launcher = launcher if launcher != "none" else "options"
    if master is not None:
        given_host, given_port = split_endpoint(master)
        host = given_host or host  # ":PORT" keeps the launcher's host (torchrun's MASTER_ADDR)
        port = given_port if given_port is not None else port
    rank = found_rank if rank is None else rank
    world_size = found_world if world_size is None else world_size
    if rank is None or world_size is None:
        raise UserError(
            "cannot tell this task's rank and the number of ranks: run under srun, torchrun or mpirun, "
            "or give --rank and --world-size"
        )
    if world_size < 1 or not 0 <= rank < world_size:
        raise UserError(f"rank {rank} is not within a world of {world_size} ranks")
    if host is None:
        raise UserError("cannot tell where rank 0 runs: give --master HOST:PORT (or set MASTER_ADDR)")
    return Placement(rank, world_size, host, port or DEFAULT_PORT, local_rank or 0, launcher, tuple(nodes))


def _from_launcher(
    env: Mapping[str, str],
) -> tuple[str, int | None, int | None, str | None, int | None, int | None, list[str]]:
    """(launcher, rank, world size, master host, port, local rank, nodes) from the environment."""
    master_port = _number(env, "MASTER_PORT")
    # torchrun (and torch.distributed.run's elastic agent) sets these for every worker
    if "RANK" in env and "WORLD_SIZE" in env and "TORCHELASTIC_RUN_ID" in env:
        port = master_port + 1 if master_port is not None else None  # its store holds MASTER_PORT
        return (
            "torchrun", _number(env, "RANK"), _number(env, "WORLD_SIZE"), env.get("MASTER_ADDR") or None,
            port, _number(env, "LOCAL_RANK"), [],
        )  # fmt: skip
    if "SLURM_PROCID" in env and ("SLURM_STEP_NUM_TASKS" in env or "SLURM_NTASKS" in env):
        world = _number(env, "SLURM_STEP_NUM_TASKS") or _number(env, "SLURM_NTASKS")
        listed = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        nodes = expand_hostlist(listed) if listed else []
        host = env.get("MASTER_ADDR") or (nodes[0] if nodes else None)
        return "slurm", _number(env, "SLURM_PROCID"), world, host, master_port, _number(env, "SLURM_LOCALID"), nodes
    if "OMPI_COMM_WORLD_RANK" in env:
        return (
            "mpirun", _number(env, "OMPI_COMM_WORLD_RANK"), _number(env, "OMPI_COMM_WORLD_SIZE"),
            env.get("MASTER_ADDR") or None, master_port, _number(env, "OMPI_COMM_WORLD_LOCAL_RANK"), [],
        )  # fmt: skip
    if "RANK" in env and "WORLD_SIZE" in env:  # a launcher of one's own, in torch's convention
        return (
            "environment", _number(env, "RANK"), _number(env, "WORLD_SIZE"), env.get("MASTER_ADDR") or None,
            master_port, _number(env, "LOCAL_RANK"), [],
        )  # fmt: skip
    return "none", None, None, env.get("MASTER_ADDR") or None, master_port, None, []

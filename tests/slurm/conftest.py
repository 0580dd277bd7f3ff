"""A real one-host Slurm cluster for the slurm-marked tests.

``slurm_cluster`` uses the cluster that ``SLURM_CONF`` names when it answers (``.ci/run``
starts one with ``.ci/start-slurm.sh``, and it is left running).  Otherwise, as root with
Slurm and munge installed, it starts a private one (own folder, free ports) for this test
session and stops its daemons when the session ends.  Otherwise the tests are skipped with
the reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
START_SCRIPT = REPO / ".ci" / "start-slurm.sh"
DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = (*DAEMONS, "srun", "sbatch", "scontrol", "sinfo")


@dataclass(frozen=True)
class Cluster:
    conf: Path
    node: str  # the one node's name

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env(), timeout=timeout, check=False)

    def state(self) -> tuple[str, str]:
        """(sinfo's long state, the reason) of the node."""
        out = self.run("sinfo", "--noheader", "--Node", f"--nodes={self.node}", "--format=%T|%E").stdout
        state, _, reason = out.splitlines()[0].partition("|")
        return state.strip(), reason.strip()


def _answers(conf: str) -> str | None:
    """None when the cluster of ``conf`` answers and has a node, else why not."""
    if not Path(conf).is_file():
        return "no such file"
    env = {**os.environ, "SLURM_CONF": conf}
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, env=env, timeout=10, check=False)
        nodes = subprocess.run(
            ["sinfo", "--noheader", "--Node", "--format=%N"], capture_output=True, text=True, env=env, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if "is UP" not in ping.stdout:
        return (ping.stdout + ping.stderr).strip() or f"scontrol ping exited {ping.returncode}"
    return None if nodes.stdout.split() else "it has no node"


def _free_port_pair() -> int:
    """A port p with p and p + 1 free (slurmctld and slurmd)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port < 65535:
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no two consecutive free ports found")


def _node(conf: Path) -> str:
    out = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--format=%N"],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": str(conf)},
        timeout=10,
        check=False,
    )
    return out.stdout.split()[0]


def _stop(folder: Path, env: dict[str, str]) -> None:
    """Stop the daemons of ``folder`` (by the pid files they wrote) and remove the folder."""
    proc = subprocess.run(["bash", str(START_SCRIPT), "stop"], capture_output=True, text=True, env=env, timeout=60)
    if proc.returncode != 0:
        warnings.warn(f"stopping the test cluster failed: {proc.stderr.strip()}", stacklevel=1)
        return
    shutil.rmtree(folder, onerror=lambda *a: warnings.warn(f"could not remove {a[1]}: {a[2][1]}", stacklevel=1))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    conf = os.environ.get("SLURM_CONF")
    if conf:
        problem = _answers(conf)
        if problem is None:
            yield Cluster(Path(conf), _node(Path(conf)))  # someone else's: left running
            return
        reason = f"SLURM_CONF={conf} does not answer ({problem})"
    else:
        reason = "SLURM_CONF is not set"
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        pytest.skip(f"no Slurm cluster: {reason}, and {', '.join(missing)} not installed (bash .ci/start-slurm.sh)")
    if os.geteuid() != 0:
        pytest.skip(f"no Slurm cluster: {reason}, and starting munged, slurmctld and slurmd needs root")
    folder = Path(tempfile.mkdtemp(prefix="cd-slurm-"))
    env = {**os.environ, "CUDA_DOCTOR_SLURM_DIR": str(folder), "CUDA_DOCTOR_SLURM_PORT": str(_free_port_pair())}
    proc = subprocess.run(["bash", str(START_SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    try:
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"no Slurm cluster: {reason}, and {START_SCRIPT.name} failed: {tail}")
        started = folder / "slurm.conf"
        yield Cluster(started, _node(started))
    finally:
        _stop(folder, env)
        left = [name for name in DAEMONS if _runs_from(folder, name)]
        assert not left, f"still running after the test session: {left}"


def _runs_from(folder: Path, daemon: str) -> bool:
    """Whether a ``daemon`` process started with this folder's files still runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if daemon in cmdline and str(folder) in cmdline:
            return True
    return False


@pytest.fixture
def slurm_admin(slurm_cluster: Cluster) -> Iterator[Cluster]:
    """The cluster, for tests that drain and undrain its node (Slurm allows that to root only).

    The node is put back as it was found: undrained when it was not drained before.
    """
    if os.geteuid() != 0:
        pytest.skip("draining a Slurm node needs root (SlurmUser here)")
    before, _ = slurm_cluster.state()
    yield slurm_cluster
    if "drain" not in before and "drain" in slurm_cluster.state()[0]:
        slurm_cluster.run("scontrol", "update", f"nodename={slurm_cluster.node}", "state=undrain")

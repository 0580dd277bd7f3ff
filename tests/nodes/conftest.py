"""Fixtures of the nodes-marked tests: a real cluster of network namespaces with Slurm (session-
scoped, removed at the end whatever happened), and a second interpreter with another torch."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.nodes.cluster import ClusterError, NamespaceCluster, missing_requirements

REPO = Path(__file__).resolve().parents[2]
#: Another torch than tests/conftest.py's TORCH_CPU_VERSION (2.13.0+cpu): the newest the package
#: index of this CI has, a CUDA build (it imports and runs Gloo on a machine without a GPU).
OTHER_TORCH_VERSION = "2.14.1"


@pytest.fixture(scope="session")
def ns_cluster() -> Iterator[NamespaceCluster]:
    why = missing_requirements()
    if why is not None:
        pytest.skip(f"no cluster of network namespaces: {why}")
    cluster = NamespaceCluster(Path(tempfile.mkdtemp(prefix="cd-nodes-")))
    try:
        try:
            cluster.start()
        except (ClusterError, OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"no cluster of network namespaces: {exc}")
        yield cluster
    finally:
        cluster.stop()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    assert not any(node.netns in left for node in cluster.nodes), f"namespaces left behind: {left}"


@pytest.fixture(scope="session")
def other_torch_python() -> Path:
    """A real interpreter with torch OTHER_TORCH_VERSION, cached in ``.cache/torch-other-venv``."""
    venv = REPO / ".cache" / "torch-other-venv"
    python = venv / "bin" / "python"
    marker = venv / ".ready"
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == OTHER_TORCH_VERSION and python.exists():
        return python
    for argv in (
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", f"torch=={OTHER_TORCH_VERSION}"],
    ):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"could not install torch {OTHER_TORCH_VERSION}: {exc}")
        if done.returncode != 0:
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
            pytest.skip(f"could not install torch {OTHER_TORCH_VERSION} (exit {done.returncode}): {tail[0]}")
    marker.write_text(OTHER_TORCH_VERSION + "\n", encoding="utf-8")
    return python

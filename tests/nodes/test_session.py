"""``cuda-doctor nodes`` as real processes on loopback: several ranks on this machine, the
rendezvous, the protocol, the deadline, and the all-reduce with a real CPU torch."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

#: Seconds one rank's process may take in these tests (they end far sooner).
LIMIT = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(rank: int, world: int, port: int, *options: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "cuda_doctor", "nodes", "--rank", str(rank), "--world-size", str(world)]
    argv += ["--master", f"127.0.0.1:{port}", "--ports", "0", *options]  # one port each: the ranks share a host
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_ranks(ranks: Sequence[int], world: int, *options: str) -> dict[int, tuple[int, str, str]]:
    """rank → (exit status, stdout, stderr) of the ranks started; rank 0 first."""
    port = free_port()
    procs = {rank: start(rank, world, port, *options) for rank in ranks}
    out: dict[int, tuple[int, str, str]] = {}
    for rank, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=LIMIT)
        out[rank] = (proc.returncode, stdout, stderr)
    return out


def result(report: dict[str, Any], rule: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["rule"] == rule)


def test_three_ranks_meet_and_only_rank_0_prints() -> None:
    done = run_ranks([0, 1, 2], 3, "--backend", "none", "--format", "json", "--deadline", "30")
    code, stdout, _ = done[0]
    assert code == 0
    report = json.loads(stdout)
    facts = report["facts"]["values"]
    assert facts["nodes.joined"] == 3 and facts["nodes.missing"] == []
    assert facts["nodes.connections_tried"] == 6 and facts["nodes.unreachable"] == []
    assert result(report, "CD855")["status"] == "skipped"
    for rank in (1, 2):
        assert done[rank] == (0, "", "")  # the verdict's exit status, and silence


def test_a_rank_that_never_joins_is_named_and_nothing_waits_for_it() -> None:
    done = run_ranks([0, 1], 3, "--backend", "none", "--format", "json", "--deadline", "3")
    code, stdout, _ = done[0]
    assert code == 1
    report = json.loads(stdout)
    assert result(report, "CD851")["message"] == "rank 2 (on a node the launcher does not name), did not join in 3 s"
    assert report["facts"]["values"]["nodes.joined"] == 2
    assert done[1][0] == 1  # rank 0's verdict


def test_a_rank_without_rank_0_ends_at_its_deadline() -> None:
    code, stdout, stderr = run_ranks([1], 2, "--deadline", "2")[1]
    assert code == 2 and stdout == ""
    assert "could not reach rank 0 at 127.0.0.1:" in stderr


def test_a_stranger_on_the_meeting_port_is_ignored_and_named() -> None:
    port = free_port()
    zero = start(0, 2, port, "--backend", "none", "--format", "json", "--deadline", "20")
    stranger = _connect(port)
    try:
        payload = json.dumps({"type": "hello", "rank": 0, "facts": {"values": {}}}).encode()
        stranger.sendall(struct.pack(">I", len(payload)) + payload)  # claims rank 0, which is taken
        one = start(1, 2, port, "--backend", "none", "--deadline", "20")
        stdout, _ = zero.communicate(timeout=LIMIT)
        one.communicate(timeout=LIMIT)
    finally:
        stranger.close()
    report = json.loads(stdout)
    assert zero.returncode == 0
    assert "claimed rank 0, which is not free: ignored" in report["facts"]["values"]["nodes.problems"][0]


def _connect(port: int) -> socket.socket:
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_gloo_all_reduce_with_a_real_torch(torch_cpu_python: Path, tmp_path: Path) -> None:
    saved = tmp_path / "reports"
    options = ["--python", str(torch_cpu_python), "--format", "json", "--deadline", "60"]
    done = run_ranks([0, 1, 2], 3, *options, "--save-dir", str(saved))
    code, stdout, stderr = done[0]
    assert code == 0, stderr
    report = json.loads(stdout)
    facts = report["facts"]["values"]
    assert facts["nodes.allreduce.backend"] == "gloo" and facts["nodes.allreduce.sum_ok"] is True
    assert facts["nodes.allreduce.busbw_gbps"] > 0
    assert facts["torch.version"].startswith("2.13.0")
    assert result(report, "CD856")["status"] == "pass"
    # each node's report, for `cuda-doctor fleet`
    assert len(list(saved.glob("*.json"))) == 3
    fleet = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "fleet", str(saved), "--format", "json"],
        capture_output=True, text=True, timeout=LIMIT, check=False,
    )  # fmt: skip
    assert fleet.returncode == 0, fleet.stderr
    assert len(json.loads(fleet.stdout)["nodes"]) == 3


def test_an_interpreter_without_torch_fails_the_all_reduce(plain_python: Path) -> None:
    options = ["--python", str(plain_python), "--backend", "gloo", "--format", "json", "--deadline", "30"]
    code, stdout, _ = run_ranks([0, 1], 2, *options)[0]
    assert code == 1
    message = result(json.loads(stdout), "CD855")["message"]
    assert message.startswith("the gloo all-reduce failed: rank 0, node ")
    assert "torch cannot be imported: ModuleNotFoundError" in message


@pytest.mark.parametrize("option", [["--ports", "0-5"], ["--ports", "1-100"], ["--master", "h:0"]])
def test_bad_options_are_usage_errors(option: list[str]) -> None:
    argv = [sys.executable, "-m", "cuda_doctor", "nodes", "--rank", "0", "--world-size", "1", *option]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT, check=False)
    assert done.returncode == 2 and done.stdout == ""


def test_under_torchrun(torch_cpu_python: Path) -> None:
    """torchrun's own environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT of its store): rank 0
    meets the others one port above its store, and the all-reduce does not use torchrun's store."""
    torchrun = torch_cpu_python.with_name("torchrun")
    argv = [str(torchrun), "--nnodes=1", "--nproc-per-node=3", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    argv += ["--no-python", sys.executable, "-m", "cuda_doctor", "nodes", "--ports", "0", "--format", "json"]
    argv += ["--python", str(torch_cpu_python), "--deadline", "60", "--allreduce-timeout", "60"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    facts = report["facts"]["values"]
    assert (facts["nodes.launcher"], facts["nodes.joined"], facts["nodes.allreduce.status"]) == ("torchrun", 3, "ok")


def test_when_one_rank_fails_the_others_stop_at_once(torch_cpu_python: Path, plain_python: Path) -> None:
    """Rank 1's interpreter has no torch: it fails at once, and rank 0 stops its own rank and
    rank 2's instead of letting them wait out --allreduce-timeout."""
    port = free_port()
    common = ["--backend", "gloo", "--deadline", "30", "--allreduce-timeout", "600"]
    zero = start(0, 3, port, *common, "--python", str(torch_cpu_python), "--format", "json")
    one = start(1, 3, port, *common, "--python", str(plain_python))
    two = start(2, 3, port, *common, "--python", str(torch_cpu_python))
    stdout, _ = zero.communicate(timeout=LIMIT)  # far inside the 600 s the all-reduce was given
    one.communicate(timeout=LIMIT)
    two.communicate(timeout=LIMIT)
    message = result(json.loads(stdout), "CD855")["message"]
    assert "rank 1, node " in message and "torch cannot be imported" in message
    assert "(2 other rank(s) did not finish either)" in message


def test_rank_0_on_a_taken_port_is_a_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start(0, 2, port, "--backend", "none", "--deadline", "5")
        stdout, stderr = proc.communicate(timeout=LIMIT)
    assert proc.returncode == 2 and stdout == ""
    assert f"cannot listen on port {port}" in stderr

from __future__ import annotations

import os

from cuda_doctor.nccl import runner
from cuda_doctor.nccl.allreduce_child import STALL_ENV
from tests.nccl.conftest import FIXTURES

SMALL = (4096, 65536)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != STALL_ENV}
    env.update(extra)
    return env


def test_gloo_allreduce_two_processes(torch_python: str) -> None:
    result = runner.run_group(torch_python, 2, backend="gloo", timeout=120, env=_env(), sizes=SMALL, iters=2, warmup=1)
    assert result.status == "ok", result.error
    assert result.sum_ok is True
    assert [r["rank"] for r in result.ranks] == [0, 1]
    assert {r["backend"] for r in result.ranks} == {"gloo"}
    busbw = result.busbw_gbps()
    assert list(busbw) == ["4096", "65536"]
    assert all(v > 0 for v in busbw.values())
    assert all(isinstance(t, float) for t in runner.per_rank(result, "local_seconds"))


def test_rank_that_never_joins_is_killed_and_named(torch_python: str) -> None:
    result = runner.run_group(
        torch_python, 2, backend="gloo", timeout=8, env=_env(**{STALL_ENV: "1"}), sizes=SMALL, iters=1, warmup=0
    )
    assert result.status == "timeout"
    assert result.error == "timeout: rank 1 did not join within 8 s"
    assert result.ranks == ()


def test_children_get_nvls_off_unless_the_user_chose() -> None:
    env = runner.child_env({"PATH": "/usr/bin"}, 1, 2, 1234)
    assert (env["NCCL_NVLS_ENABLE"], env["TORCH_SYMM_MEM_DISABLE_MULTICAST"], env["NVSHMEM_DISABLE_NVLS"]) == (
        "0",
        "1",
        "1",
    )
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("1", "2", "127.0.0.1")
    chosen = runner.child_env({"NCCL_NVLS_ENABLE": "1"}, 0, 2, 1234)
    assert chosen["NCCL_NVLS_ENABLE"] == "1"  # the training's own setting is what is measured
    assert runner.nvls_setting({"NCCL_NVLS_ENABLE": "1"}) == "1" and runner.nvls_setting({}) == "0"


def test_missing_interpreter_is_a_failure_not_a_crash() -> None:
    result = runner.run_group("/nonexistent/python3", 2, backend="gloo", timeout=5, env=_env())
    assert result.status == "failed"
    assert result.error is not None and "cannot start rank 0" in result.error


def test_rank_error_fails_the_group_promptly(torch_python: str, tmp_path: object) -> None:
    # an unknown backend makes every rank report an error event and exit 1
    result = runner.run_group(torch_python, 2, backend="mpi", timeout=60, env=_env(), sizes=SMALL)
    assert result.status == "failed"
    assert result.error is not None and result.error.startswith("rank ")


def test_parse_recorded_rank_output_with_nccl_chatter() -> None:
    text = (FIXTURES / "rank0.jsonl").read_text()
    events = runner.parse_events(text)
    assert [e["event"] for e in events] == ["started", "joining", "joined", "result"]
    result = events[-1]
    assert result["sum_ok"] is True and result["backend"] == "nccl"
    assert result["p2p"] == {"0-1": True}
    assert set(result["sizes"]) == {"1048576", "16777216", "268435456"}
    assert "NCCL INFO" in text  # the chatter really was there and was skipped


def test_busbw_takes_the_slowest_rank() -> None:
    events = [runner.parse_events((FIXTURES / f"rank{r}.jsonl").read_text())[-1] for r in (0, 1)]
    ranks = tuple({k: v for k, v in e.items() if k != "event"} for e in events)
    group = runner.GroupResult("ok", None, 2, ranks)
    per_size = [{s: row["busbw_gbps"] for s, row in r["sizes"].items()} for r in ranks]
    for size, value in group.busbw_gbps().items():
        assert value == min(p[size] for p in per_size)


def test_outliers_compare_only_identical_gpus() -> None:
    assert runner.outliers([1.0, 1.0, 1.0, 2.0]) == [3]
    assert runner.outliers([1.0, 1.1, 1.2]) == []
    assert runner.outliers([1.0, 3.0], ["A100", "T4"]) == []
    assert runner.outliers([1.0, 1.0, 3.0, 3.0], ["A", "A", "A", "B"]) == [2]
    assert runner.outliers([1.0, None, 1.0]) == []

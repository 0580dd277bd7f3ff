"""One check per node: local rank 0 checks, the node's other ranks take its verdict (``api.ranks``)
— as torchrun and srun start them (siblings), as Lightning's launcher does (rank 0 starts the
others), and as ranks with different parents in one Slurm job step."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.api import ranks
from tests.api.fake_machine import h200_env, run_script

#: A rank: those other than 0 must not check (``check`` refuses), and say what ``require`` did.
RANK = r"""
import os, sys, cuda_doctor, cuda_doctor.api as api
rank = os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
if rank != "0":
    def refuse(**options):
        raise AssertionError("a rank other than local rank 0 checked")
    api.check = refuse
try:
    print("RETURNED", cuda_doctor.require(wait=float(os.environ.get("WAIT", "60"))))
except cuda_doctor.PreflightError as error:
    print("RAISED", error.headline)
    print(error, end="")
"""

#: torchrun's way: one parent starts every local rank; rank 0 starts last, so the others wait.
SIBLINGS = r"""
import json, os, subprocess, sys, time
children = {}
for rank in (1, 2, 0):
    env = {**os.environ, "LOCAL_RANK": str(rank), "RANK": str(rank), "WORLD_SIZE": "3"}
    children[rank] = subprocess.Popen([sys.executable, "rank.py"], env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(0.5 if rank == 2 else 0)
print(json.dumps({rank: [child.communicate(timeout=120)[0], child.returncode] for rank, child in children.items()}))
"""

#: Lightning's way: rank 0 checks, then starts the others with LOCAL_RANK set.
LAUNCHER = r"""
import json, os, subprocess, sys
import cuda_doctor
try:
    line = "RETURNED " + cuda_doctor.require()
except cuda_doctor.PreflightError as error:
    line = "RAISED " + error.headline
env = {**os.environ, "LOCAL_RANK": "1"}
child = subprocess.run([sys.executable, "rank.py"], env=env, capture_output=True, text=True, timeout=120)
print(json.dumps({"0": line, "1": [child.stdout, child.returncode, child.stderr[-2000:]]}))
"""


def ranks_run(tmp_path: Path, launcher: str, **env: str) -> dict[str, Any]:
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "work" / "rank.py").write_text(RANK, encoding="utf-8")
    done = run_script(launcher, tmp_path, h200_env(tmp_path, **env))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_siblings_on_a_healthy_node_all_go_on_and_only_rank_0_checks(tmp_path: Path) -> None:
    got = ranks_run(tmp_path, SIBLINGS)
    lines = {rank: out for rank, (out, code) in got.items() if code == 0}
    assert set(lines) == {"0", "1", "2"}, got
    assert lines["0"].startswith("RETURNED OK driver 580.159.04")
    assert lines["1"] == lines["2"] == lines["0"]


def test_siblings_on_a_broken_node_all_stop_with_the_same_checklist(tmp_path: Path) -> None:
    got = ranks_run(tmp_path, SIBLINGS, CUDA_VISIBLE_DEVICES="7")
    outputs = {rank: out for rank, (out, code) in got.items() if code == 0}
    assert set(outputs) == {"0", "1", "2"}, got
    assert outputs["0"].startswith("RAISED FAIL CD401 ")
    assert "$ export CUDA_VISIBLE_DEVICES=0" in outputs["0"]
    assert outputs["1"] == outputs["2"] == outputs["0"]


def test_ranks_started_by_rank_0_take_its_verdict(tmp_path: Path) -> None:
    got = ranks_run(tmp_path, LAUNCHER, CUDA_VISIBLE_DEVICES="7")
    out, code, err = got["1"]
    assert code == 0, err
    assert str(got["0"]).startswith("RAISED FAIL CD401 ")
    assert out.startswith(str(got["0"]) + "\n")


def test_ranks_with_different_parents_meet_through_the_slurm_job_step(tmp_path: Path) -> None:
    # `srun bash -c "python train.py"`: every task's python has its own shell as parent
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "rank.py").write_text(RANK, encoding="utf-8")
    launcher = r"""
import json, os, subprocess, sys, time
job = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}
one = subprocess.Popen(["sh", "-c", f"'{sys.executable}' rank.py; :"], env={**os.environ, **job, "SLURM_LOCALID": "1"},
                       stdout=subprocess.PIPE, text=True)
time.sleep(0.5)
zero = subprocess.Popen(["sh", "-c", f"'{sys.executable}' rank.py; :"], env={**os.environ, **job, "SLURM_LOCALID": "0"},
                        stdout=subprocess.PIPE, text=True)
print(json.dumps([zero.communicate(timeout=120)[0], one.communicate(timeout=120)[0]]))
"""
    done = run_script(launcher, tmp_path, h200_env(tmp_path, CUDA_VISIBLE_DEVICES="7"))
    assert done.returncode == 0, done.stderr
    zero, one = json.loads(done.stdout)
    assert zero.startswith("RAISED FAIL CD401 ") and one == zero


def test_a_rank_without_a_verdict_in_time_checks_for_itself_without_gpu_work(tmp_path: Path) -> None:
    script = RANK.replace("api.check = refuse", "pass") + "\n"
    done = run_script(script, tmp_path, h200_env(tmp_path, LOCAL_RANK="3", WAIT="0.3"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RETURNED OK driver 580.159.04")
    assert "no verdict from local rank 0 in 0.3 s: checking here (fast, no GPU work)" in done.stderr


def test_a_rank_without_a_private_folder_checks_for_itself_at_once(tmp_path: Path) -> None:
    shared = tmp_path / "tmp" / f"cuda-doctor-{os.geteuid()}"
    shared.mkdir(parents=True)
    shared.chmod(0o777)  # anyone could plant a verdict there
    script = RANK.replace("api.check = refuse", "pass") + "\n"
    done = run_script(script, tmp_path, h200_env(tmp_path, LOCAL_RANK="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RETURNED OK driver 580.159.04")
    assert "no private folder for local rank 0's verdict in " in done.stderr
    assert not list(shared.iterdir())


def test_a_rank_0_that_cannot_check_stops_the_others_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pyproject.toml").write_text('[tool.cuda-doctor]\nfail-on = "fatal"\n', encoding="utf-8")
    got = ranks_run(tmp_path, SIBLINGS)
    zero, one = got["0"], got["1"]
    assert zero[1] != 0  # rank 0 ends with the ValueError itself
    assert one[0].startswith("RAISED ERROR ") and "fail-on" in one[0]


# -- the parts, on their own ----------------------------------------------------------------------


def test_the_local_rank_comes_from_local_rank_then_slurm_localid() -> None:
    assert ranks.local_rank({}) == 0
    assert ranks.local_rank({"LOCAL_RANK": "3", "SLURM_LOCALID": "0"}) == 3
    assert ranks.local_rank({"SLURM_LOCALID": "2"}) == 2
    assert ranks.local_rank({"LOCAL_RANK": "x", "SLURM_LOCALID": "1"}) == 1


def test_the_job_key() -> None:
    assert ranks.job_key({}) is None
    assert ranks.job_key({"TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_RESTART_COUNT": "0"}) is None
    one = ranks.job_key({"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0"})
    assert (
        one is not None and one.startswith("job-") and one == ranks.job_key({"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0"})
    )
    assert one != ranks.job_key({"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "1"})


def test_a_restart_count_that_is_no_number_never_reaches_a_file_name() -> None:
    key = ranks.process_key(os.getpid(), {"TORCHELASTIC_RESTART_COUNT": "../../x"})
    assert key is not None and key.endswith("-0") and "/" not in key


def test_a_job_verdict_older_than_the_process_is_not_taken(tmp_path: Path) -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}
    key = ranks.job_key(env)
    assert key is not None
    ranks.publish(tmp_path, [key], ranks.Verdict(False, "FAIL old", "old checklist\n"), pid=1)
    now = time.time()
    stale = ranks.await_verdict(tmp_path, env, ppid=0, wait=0.1, my_start=now + ranks.JOB_SLACK + 5)
    fresh = ranks.await_verdict(tmp_path, env, ppid=0, wait=0.1, my_start=now)
    assert stale is None
    assert fresh == ranks.Verdict(False, "FAIL old", "old checklist\n")


@pytest.mark.parametrize("content", ["", "{", "[]", '{"verdict": {"ok": "yes", "headline": "", "checklist": ""}}'])
def test_a_verdict_file_that_is_not_one_is_not_taken(tmp_path: Path, content: str) -> None:
    key = ranks.process_key(os.getppid(), {})
    (tmp_path / f"{key}.json").write_text(content, encoding="utf-8")
    assert ranks.await_verdict(tmp_path, {}, os.getppid(), wait=0.1, my_start=None) is None


def test_a_folder_others_may_write_to_is_not_used(tmp_path: Path) -> None:
    assert ranks.folder(tmp_path) == tmp_path / f"cuda-doctor-{os.geteuid()}"
    (tmp_path / f"cuda-doctor-{os.geteuid()}").chmod(0o777)
    assert ranks.folder(tmp_path) is None
    other = tmp_path / "other"
    other.mkdir()
    (other / f"cuda-doctor-{os.geteuid()}").symlink_to(tmp_path)
    assert ranks.folder(other) is None


def test_verdicts_of_earlier_days_are_removed(tmp_path: Path) -> None:
    old = tmp_path / "proc-1-2-0.json"
    old.write_text("{}", encoding="utf-8")
    os.utime(old, (time.time() - 2 * ranks.KEEP, time.time() - 2 * ranks.KEEP))
    ranks.publish(tmp_path, ["proc-3-4-0"], ranks.Verdict(True, "OK", ""), pid=3)
    assert not old.exists() and (tmp_path / "proc-3-4-0.json").exists()


def test_a_process_start_is_read_from_proc() -> None:
    mine, first = ranks.started_at(os.getpid()), ranks.started_at(1)
    assert mine is not None and first is not None
    assert first <= mine <= time.time()  # process 1 started before this one, and this one before now
    assert ranks.started(os.getpid()) is not None and ranks.started(2**22 + 1) is None  # past pid_max

"""A write that fails never destroys the file it was to replace: every command that writes a
file, run as a real process under a file-size limit (``ulimit -f``), leaves the previous file
byte for byte as it was and no temporary file behind."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

CUDA_DOCTOR = str(Path(sys.executable).with_name("cuda-doctor"))
TESTS = Path(__file__).resolve().parents[1]
PREVIOUS = b'{"schema": "cuda-doctor/report", "note": "the previous report, which must survive"}\n' * 200


def limited(args: list[str], cwd: Path, env: dict[str, str], limit: int = 0) -> subprocess.CompletedProcess[str]:
    """cuda-doctor with RLIMIT_FSIZE ``limit`` bytes: every write past it fails with EFBIG
    (Python ignores SIGXFSZ).  Pipes are not files: stdout and stderr still arrive."""

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [CUDA_DOCTOR, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=limit_file_size,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CUDA_DOCTOR_DISABLE_NVML": "1",  # whatever this host has
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }


@pytest.fixture
def lint_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "code"
    tree.mkdir()
    # a file with findings (CDL001: the deprecated torch.cuda.amp API)
    (tree / "train.py").write_bytes((TESTS / "lint" / "cases" / "amp_deprecated.py").read_bytes())
    return tree


def _leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--fast", "--save", "keep.json"],
        ["check", "--fast", "--format", "json", "--save", "keep.json"],
        ["facts", "--fast", "-o", "keep.json"],
        ["facts", "--fast", "--format", "json", "-o", "keep.json"],
        ["watch", "--save", "keep.json", "--", "true"],
        ["watch", "-o", "keep.json", "--", "true"],
        ["watch", "--format", "json", "-o", "keep.json", "--", "true"],
        ["lint", "code", "-o", "keep.json"],
        ["lint", "code", "--format", "sarif", "-o", "keep.json"],
    ],
    ids=lambda args: " ".join(args),
)
def test_a_failed_write_keeps_the_previous_file(
    tmp_path: Path, env: dict[str, str], lint_tree: Path, args: list[str]
) -> None:
    keep = tmp_path / "keep.json"
    keep.write_bytes(PREVIOUS)
    done = limited(args, tmp_path, env)
    assert keep.read_bytes() == PREVIOUS
    assert _leftovers(tmp_path, {"keep.json", "code", "cache"}) == []
    assert "File too large" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    if args[0] == "watch":
        assert done.returncode == 0  # the watched command's own status: the report failing does not change it
    else:
        assert done.returncode == 2
    if args[0] == "check":  # the summary tells the exit status the run ends with
        if "json" in args:
            summary = json.loads(done.stdout)["summary"]
            assert (summary["exit_code"], summary["save_error"]) == (2, "cannot write keep.json: File too large")
        else:
            last = done.stdout.strip().splitlines()[-1]
            assert last.endswith("but the report was not saved: cannot write keep.json: File too large (exit 2)")


def test_lint_keeps_the_findings_when_the_file_cannot_be_written(
    tmp_path: Path, env: dict[str, str], lint_tree: Path
) -> None:
    done = limited(["lint", "code", "-o", "out.txt"], tmp_path, env)
    assert done.returncode == 2
    assert "CDL" in done.stdout  # written to stdout instead
    assert "the report was written to stdout instead" in done.stderr


def test_lint_output_through_a_symlink_replaces_its_target(
    tmp_path: Path, env: dict[str, str], lint_tree: Path
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "lint.txt").write_text("old\n")
    (tmp_path / "latest.txt").symlink_to(reports / "lint.txt")
    done = subprocess.run(
        [CUDA_DOCTOR, "lint", "code", "-o", "latest.txt"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "latest.txt").is_symlink()  # the link stays a link, as `>` would leave it
    assert "CDL" in (reports / "lint.txt").read_text()


def test_the_toml_cache_survives_a_failed_write(tmp_path: Path, env: dict[str, str]) -> None:
    first = subprocess.run([CUDA_DOCTOR, "check", "--fast"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert first.returncode in (0, 1), first.stderr
    folder = tmp_path / "cache" / "cuda-doctor"
    (cache,) = folder.iterdir()
    before = cache.read_bytes()
    # something new to cache: a project configuration this run parses
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-doctor]\nfail-on = "error"\n', encoding="utf-8")
    for _ in range(2):
        again = limited(["check", "--fast"], tmp_path, env)
        assert again.returncode in (0, 1), again.stderr
        assert "Traceback" not in again.stderr
    assert cache.read_bytes() == before
    assert [p.name for p in folder.iterdir()] == [cache.name]  # no temporary file left behind

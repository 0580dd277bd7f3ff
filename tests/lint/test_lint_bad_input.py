"""Files that cannot be linted become CDL000 findings; the other files are still checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cuda_doctor.lint.engine import LintOptions, lint_paths

DEPRECATED = "import torch\nwith torch.cuda.amp.autocast():\n    pass\n"


def run(tmp_path: Path, **options: int) -> dict[str, list[tuple[int, str, str]]]:
    (tmp_path / "good.py").write_text(DEPRECATED)
    report = lint_paths([tmp_path], LintOptions(**options))  # type: ignore[arg-type]
    out: dict[str, list[tuple[int, str, str]]] = {}
    for f in report.findings:
        out.setdefault(Path(f.path).name, []).append((f.line, f.rule_id, f.message))
    # the good file is always checked, whatever else is broken
    assert [(line, rule) for line, rule, _ in out.pop("good.py")] == [(2, "CDL001")]
    return out


def test_syntax_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import torch\nwith torch.cuda.amp.autocast(:\n")
    [(line, rule, message)] = run(tmp_path)["broken.py"]
    assert (line, rule) == (2, "CDL000") and "syntax error" in message


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin.py").write_bytes(b"# caf\xe9\nimport torch.cuda.amp\n")
    [(line, rule, message)] = run(tmp_path)["latin.py"]
    assert (line, rule) == (1, "CDL000") and "not UTF-8" in message and "0xe9" in message


def test_declared_encoding_is_honoured(tmp_path: Path) -> None:
    (tmp_path / "latin.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n# caf\xe9\nimport torch\ntorch.cuda.amp.GradScaler()\n"
    )
    assert [(line, rule) for line, rule, _ in run(tmp_path)["latin.py"]] == [(4, "CDL001")]


def test_binary(tmp_path: Path) -> None:
    (tmp_path / "blob.py").write_bytes(b"\x7fELF\x00\x00\x01torch.cuda.amp")
    [(_, rule, message)] = run(tmp_path)["blob.py"]
    assert rule == "CDL000" and "binary" in message


def test_huge_file_is_skipped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "huge.py").write_text("x = 1\n" * 400_000)  # 2.4 MB
    report = lint_paths([tmp_path / "huge.py"], LintOptions(max_bytes=1024 * 1024))
    [finding] = report.findings
    assert finding.rule_id == "CDL000" and finding.severity == "info" and "skipped" in finding.message


def test_symlink_loop(tmp_path: Path) -> None:
    os.symlink("loop_b.py", tmp_path / "loop_a.py")
    os.symlink("loop_a.py", tmp_path / "loop_b.py")
    os.symlink(".", tmp_path / "self_dir")  # a directory loop is walked once, silently
    found = run(tmp_path)
    assert {name for name in found} == {"loop_a.py", "loop_b.py"}
    assert all("symbolic link loop" in msg for entries in found.values() for *_, msg in entries)


def test_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")  # reading it would block forever
    [(_, rule, message)] = run(tmp_path)["pipe.py"]
    assert rule == "CDL000" and "not a regular file" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable(tmp_path: Path) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text(DEPRECATED)
    secret.chmod(0)
    [(_, rule, message)] = run(tmp_path)["secret.py"]
    assert rule == "CDL000" and "cannot read" in message


def test_unreadable_proc_file(tmp_path: Path) -> None:
    if not Path("/proc/self/mem").exists():
        pytest.skip("no /proc on this system")
    os.symlink("/proc/self/mem", tmp_path / "mem.py")  # open() works, read() fails with EIO
    # named on the command line, a link out of the tree is linted; found by the walk, it is not
    [finding] = lint_paths([tmp_path / "mem.py"]).findings
    assert finding.rule_id == "CDL000" and "cannot read" in finding.message
    assert "mem.py" not in run(tmp_path)


def test_the_walk_stays_inside_the_folder_it_was_given(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "train.py").write_text(DEPRECATED)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "root").symlink_to("/")
    (repo / "elsewhere").symlink_to(outside)
    (repo / "linked.py").symlink_to(outside / "train.py")
    (repo / "inside").mkdir()
    (repo / "inside" / "real.py").write_text(DEPRECATED)
    (repo / "again").symlink_to(repo / "inside")  # a link within the tree is followed (once)
    report = lint_paths([repo])
    assert report.files == 1
    [finding] = report.findings
    assert Path(finding.path).name == "real.py" and Path(finding.path).parent.parent == repo


def test_bad_notebook_and_toml_and_cell(tmp_path: Path) -> None:
    (tmp_path / "bad.ipynb").write_text("{not json")
    (tmp_path / "pyproject.toml").write_text("[project\n")
    notebook = {
        "cells": [
            {"cell_type": "code", "source": ["def broken(:\n"]},
            {"cell_type": "code", "source": ["import torch\n", "torch.cuda.amp.GradScaler()\n"]},
        ]
    }
    (tmp_path / "cells.ipynb").write_text(json.dumps(notebook, indent=1))
    found = run(tmp_path)
    assert [rule for _, rule, _ in found["bad.ipynb"]] == ["CDL000"]
    assert [rule for _, rule, _ in found["pyproject.toml"]] == ["CDL000"]
    cells = sorted(found["cells.ipynb"])
    assert [rule for _, rule, _ in cells] == ["CDL000", "CDL001"]
    assert "cell 1: syntax error" in cells[0][2]


def test_detector_crash_is_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_doctor.lint import engine

    def explode(text: str) -> list[object]:
        raise KeyError("boom")

    monkeypatch.setattr(engine, "lint_shell", explode)
    (tmp_path / "run.sh").write_text("echo hi\n")
    [(_, rule, message)] = run(tmp_path, jobs=1)["run.sh"]
    assert rule == "CDL000" and "internal error: KeyError" in message


def _finishes(paths: list[Path]) -> bool:
    """lint_paths on a daemon thread: a read that blocks must not hang the test run."""
    import threading

    done = threading.Event()

    def lint() -> None:
        lint_paths(paths, LintOptions(jobs=1))
        done.set()

    threading.Thread(target=lint, daemon=True).start()
    return done.wait(60)


def test_a_fifo_elsewhere_in_the_project_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "train.py").write_text("loss.backward()\noptimizer.step()\n")  # a training loop: the project is scanned
    os.mkfifo(tmp_path / "other.py")  # scanned for project-wide mentions, never opened
    assert _finishes([tmp_path / "train.py"])


def test_a_fifo_named_by_pip_install_r_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "reqs.txt")
    (tmp_path / "Dockerfile").write_text("FROM python:3.12\nRUN pip install -r reqs.txt\n")
    assert _finishes([tmp_path / "Dockerfile"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root searches folders whatever their mode")
def test_an_unsearchable_folder_is_one_finding(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "inside.py").write_text(DEPRECATED)
    locked.chmod(0o644)  # listable names, but no search permission: stat() inside fails
    try:
        out = run(tmp_path)
    finally:
        locked.chmod(0o755)
    assert all(rule == "CDL000" for findings in out.values() for _, rule, _ in findings)

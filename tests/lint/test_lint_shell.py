"""Shell scripts read as commands: comments are never part of one."""

from __future__ import annotations

from cuda_doctor.lint.shell import lint_shell


def test_a_comment_naming_the_old_launcher_is_not_a_finding() -> None:
    text = "torchrun train.py  # replaces python -m torch.distributed.launch\n# python -m torch.distributed.launch\n"
    assert lint_shell(text) == []


def test_the_old_launcher_is_found_on_its_line() -> None:
    text = "set -e\npython -m torch.distributed.launch \\\n  --nproc_per_node 2 train.py\n"
    assert [(hit.line, hit.rule_id) for hit in lint_shell(text)] == [(2, "CDL006")]

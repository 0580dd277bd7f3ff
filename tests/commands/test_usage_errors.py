"""Usage errors the first minutes meet: a misspelt option of ``exec`` or ``watch`` before the
command, and ``lint --select`` with what its help suggests."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cuda_doctor.cli import cli
from cuda_doctor.core.rules import load_rules
from tests.conftest import run_doctor


@pytest.mark.parametrize(
    "args",
    [
        ["exec", "--warn-onyl", "--", "python", "train.py"],
        ["exec", "--warn-onyl", "python", "train.py"],
        ["watch", "--intervl", "1", "--", "python", "train.py"],
        ["watch", "--intervl=1", "python", "train.py"],
    ],
    ids=" ".join,
)
def test_a_misspelt_option_before_the_command_is_a_usage_error(args: list[str], tmp_path: Path) -> None:
    done = run_doctor(args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"No such option '{args[1].split('=')[0]}'" in done.stderr
    assert "command not found" not in done.stderr


@pytest.mark.parametrize("command", ["exec", "watch"])
def test_options_of_the_command_itself_still_reach_it(command: str, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1"}
    warn = ["--warn-only"] if command == "exec" else []  # no driver here: exec would refuse to start it
    for args in (
        [*warn, "--", sys.executable, "-u", str(script), "--lr", "3"],
        [*warn, sys.executable, str(script), "--lr", "3"],
    ):
        done = run_doctor([command, *args], cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "['--lr', '3']"


def test_lint_select_help_names_what_lint_accepts(tmp_path: Path) -> None:
    help_text = " ".join(CliRunner().invoke(cli, ["lint", "--help"]).output.split())
    assert "id prefixes such as CDL1; categories: code, docker, dependencies" in help_text
    assert "CD1" not in help_text.replace("CDL1", "")
    (tmp_path / "train.py").write_text("import torch\n")
    for selected in ("CDL1", "cdl0", "CDL", "code", "docker", "dependencies"):
        done = CliRunner().invoke(cli, ["lint", str(tmp_path), "--select", selected])
        assert done.exit_code == 0, (selected, done.output)
    refused = CliRunner().invoke(cli, ["lint", str(tmp_path), "--select", "CD1"])
    assert refused.exit_code == 2
    assert "run them with `cuda-doctor check --select CD1`" in refused.output


def test_lint_help_names_every_lint_category() -> None:
    categories = sorted({rule.category for rule in load_rules() if rule.kind == "lint"})
    help_text = " ".join(CliRunner().invoke(cli, ["lint", "--help"]).output.split())
    listed = re.search(r"--select RULE Run only these rules \(.*?categories: ([a-z, ]+)\)", help_text)
    assert listed is not None, help_text
    assert sorted(listed.group(1).split(", ")) == categories


def test_check_select_help_names_environment_ids() -> None:
    help_text = " ".join(CliRunner().invoke(cli, ["check", "--help"]).output.split())
    assert "id prefixes such as CD1, or categories" in help_text

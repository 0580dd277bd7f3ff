"""Usage errors of `cuda-doctor lint`: unwritable output, unknown rule ids, --exclude, messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cuda_doctor.cli import main
from cuda_doctor.commands.lint import command
from cuda_doctor.lint.engine import LintOptions, builtin_rules, lint_paths

DEPRECATED = "import torch\nwith torch.cuda.amp.autocast():\n    pass\n"


def lint(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`cuda-doctor lint ARGS` through the command line's one error boundary (``cli.main``)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "t.py").write_text(DEPRECATED)
    (work / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    code: int | str | None = 0
    with pytest.MonkeyPatch.context() as patch, CliRunner().isolation() as (out, err, _):
        patch.chdir(work)  # the command resolves relative paths and finds pyproject.toml from here
        try:
            main(["lint", *args])
        except SystemExit as exc:
            code = exc.code
    assert isinstance(code, int)
    return code, out.getvalue().decode(), err.getvalue().decode()


def test_unwritable_output_is_a_clean_error_and_keeps_the_findings(tmp_path: Path) -> None:
    code, out, err = lint(tmp_path, "-o", "t.py/x.json", "t.py")
    assert code == 2
    assert err.splitlines() == [
        "cuda-doctor: error: cannot write t.py/x.json: t.py is not a directory; "
        "the report was written to stdout instead"
    ]
    assert "t.py:2:6: CDL001" in out


@pytest.mark.parametrize("args", [["--select", "CDL999"], ["--ignore", "CDL0,NOPE"]])
def test_unknown_rule_ids_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    code, out, err = lint(tmp_path, *args, "t.py")
    assert code == 2 and out == ""
    assert re.search(r"unknown rule id or category '(CDL999|NOPE)'", err)


def test_unknown_rule_id_in_config_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[tool.cuda-doctor]\nselect = ["CDL0", "CD101", "CDLX"]\n')
    code, _, err = lint(tmp_path, "--config", str(config), "t.py")
    assert code == 2 and "'CDLX'" in err


@pytest.mark.parametrize(
    "args", [["--select", "CDL0"], ["--select", "code", "--ignore", "CD101"], ["--select", "CDL001,docker"]]
)
def test_prefixes_categories_and_env_ids_are_accepted(tmp_path: Path, args: list[str]) -> None:
    code, out, _ = lint(tmp_path, *args, "t.py")
    assert code == 0 and "CDL001" in out


def test_a_category_selects_only_its_rules(tmp_path: Path) -> None:
    code, out, _ = lint(tmp_path, "--select", "docker", "t.py")
    assert code == 0 and "CDL001" not in out


def test_exclude_skips_components_and_relative_globs(tmp_path: Path) -> None:
    for rel in ("build/a.py", "src/b.py", "src/gen/c.py", "d.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(DEPRECATED)

    def names(*exclude: str) -> list[str]:
        report = lint_paths([tmp_path], LintOptions(exclude=exclude))
        return sorted(Path(f.path).relative_to(tmp_path).as_posix() for f in report.findings)

    assert names() == ["build/a.py", "d.py", "src/b.py", "src/gen/c.py"]
    assert names("build") == ["d.py", "src/b.py", "src/gen/c.py"]
    assert names("src/*.py", "gen") == ["build/a.py", "d.py"]
    assert names("*.py") == []


def test_exclude_option_on_the_command_line(tmp_path: Path) -> None:
    code, out, _ = lint(tmp_path, "--exclude", "t.py", ".")
    assert code == 0 and "CDL001" not in out


def test_syntax_error_is_one_sentence_with_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import torch\nwith torch.cuda.amp.autocast(:\n")
    [finding] = lint_paths([tmp_path / "broken.py"]).findings
    assert finding.rule_id == "CDL000" and (finding.line, finding.column) == (2, finding.column)
    assert finding.message.startswith(f"not checked: syntax error at line 2, column {finding.column} (")
    assert finding.message.count("not checked") == 1


def test_rationales_explain_without_placeholders() -> None:
    for rule in builtin_rules().values():
        assert "{" not in rule.rationale and "}" not in rule.rationale, rule.id
        if not re.sub(r"\{[A-Za-z_]\w*\}", "", rule.fix).strip(" .`"):
            # the fix is all placeholders: the rationale must say what the finding suggests
            assert "suggest" in rule.rationale or "fix" in rule.rationale, rule.id


def test_cdl000_fix_names_an_option_that_exists() -> None:
    fix = builtin_rules()["CDL000"].fix
    assert "--exclude" in fix
    assert any(p.opts == ["--exclude"] for p in command.params)

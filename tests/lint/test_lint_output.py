"""Output formats (SARIF validated against the OASIS 2.1.0 schema) and the CLI's exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import run_doctor

CASES = Path(__file__).parent / "cases"
SCHEMA = Path(__file__).parent / "fixtures" / "sarif-schema-2.1.0.json"
ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_doctor(["lint", *args], cwd=cwd, timeout=120)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name in ("launcher.py", "Dockerfile.tags", "dataloader/train_images.py", "bf16_scaler.py"):
        shutil.copy(CASES / name, tmp_path / Path(name).name)
    return tmp_path


def test_sarif_is_valid_sarif_2_1_0(repo: Path) -> None:
    result = cli("--format", "sarif", ".", cwd=repo)
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(document, schema, cls=jsonschema.Draft4Validator)
    run = document["runs"][0]
    results = run["results"]
    assert {r["ruleId"] for r in results} >= {"CDL006", "CDL007", "CDL101", "CDL102", "CDL008"}
    rules = run["tool"]["driver"]["rules"]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        location = r["locations"][0]["physicalLocation"]
        assert not location["artifactLocation"]["uri"].startswith("/")
        assert location["region"]["startLine"] >= 1
    assert {r["level"] for r in results} == {"error", "warning", "note"}


def test_json_report(repo: Path) -> None:
    document = json.loads(cli("--format", "json", ".", cwd=repo).stdout)
    assert document["schema"] == "cuda-doctor/lint" and document["schema_version"] == 1
    finding = next(f for f in document["findings"] if f["rule"] == "CDL007")
    assert finding["path"] == "launcher.py" and finding["line"] == 9 and finding["column"] == 21
    assert finding["fix"].startswith("Read `local_rank")
    assert document["summary"]["error"] == sum(f["severity"] == "error" for f in document["findings"])


def test_github_annotations(repo: Path) -> None:
    lines = cli("--format", "github", ".", cwd=repo).stdout.splitlines()
    assert any(line.startswith("::error file=Dockerfile.tags,line=2,col=6,title=CDL101 ") for line in lines)
    assert any(line.startswith("::notice file=bf16_scaler.py,") for line in lines)
    for line in lines:
        assert "\n" not in line and "%0AFix%3A" not in line.split("::", 2)[1]


def test_text_and_exit_codes(repo: Path) -> None:
    text = cli(".", cwd=repo)
    assert text.returncode == 1
    assert "Dockerfile.tags:2:6: CDL101 error:" in text.stdout
    assert text.stdout.rstrip().splitlines()[-1].endswith("in 4 files")
    # only warnings left once the Dockerfile is ignored: exit 0 at the default --fail-on error
    assert cli("--ignore", "CDL1", ".", cwd=repo).returncode == 0
    assert cli("--ignore", "CDL1", "--fail-on", "warning", ".", cwd=repo).returncode == 1
    only = cli("--select", "CDL005", "--fail-on", "info", ".", cwd=repo)
    assert only.returncode == 1 and "CDL005" in only.stdout and "CDL006" not in only.stdout
    assert cli("--select", "CDL005", ".", cwd=repo).returncode == 0


def test_usage_errors_exit_2(repo: Path) -> None:
    missing = cli("nope.py", cwd=repo)
    assert missing.returncode == 2 and "nope.py" in missing.stderr
    assert cli("--format", "xml", ".", cwd=repo).returncode == 2
    (repo / "pyproject.toml").write_text("[tool.cuda-doctor]\nselct = ['CDL001']\n")
    bad_config = cli(".", cwd=repo)
    assert bad_config.returncode == 2 and "selct" in bad_config.stderr
    assert "Traceback" not in bad_config.stderr


def test_config_select_ignore_and_severity(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(
        "[tool.cuda-doctor]\n"
        'select = ["CD1", "CDL1", "CDL006"]\n'  # CD1 is an environment prefix: lint keeps CDL entries
        'ignore = ["CDL104"]\n'
        'severity = { CDL101 = "info", CDL102 = "off" }\n'
    )
    document = json.loads(cli("--format", "json", ".", cwd=repo).stdout)
    rules = {f["rule"] for f in document["findings"]}
    assert rules == {"CDL006", "CDL101", "CDL103"}
    assert {f["severity"] for f in document["findings"] if f["rule"] == "CDL101"} == {"info"}


def test_config_severity_by_prefix(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.cuda-doctor]\nseverity = { CDL1 = "off", CDL006 = "info" }\n')
    document = json.loads(cli("--format", "json", ".", cwd=repo).stdout)
    assert not [f for f in document["findings"] if f["rule"].startswith("CDL1")]
    assert {f["severity"] for f in document["findings"] if f["rule"] == "CDL006"} == {"info"}


def test_output_file(repo: Path) -> None:
    result = cli("--format", "sarif", "-o", "out.sarif", "launcher.py", cwd=repo)
    assert result.returncode == 0 and result.stdout == ""
    assert json.loads((repo / "out.sarif").read_text())["version"] == "2.1.0"


def _limit_file_size() -> None:
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


def test_a_failed_write_keeps_the_previous_report(repo: Path) -> None:
    (repo / "out.sarif").write_text("previous report\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, "-m", "cuda_doctor", "lint", "--format", "sarif", "-o", "out.sarif", "."],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_file_size,
    )
    assert result.returncode == 2 and "cannot write out.sarif" in result.stderr
    assert json.loads(result.stdout)["version"] == "2.1.0"  # the findings went to stdout instead
    assert (repo / "out.sarif").read_text() == "previous report\n"
    assert not [p.name for p in repo.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_text_output_escapes_what_comes_from_the_linted_files(tmp_path: Path) -> None:
    name = "train\x1b]2;PWNED\x07.py"
    (tmp_path / name).write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    result = cli(name, cwd=tmp_path)
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b]2;PWNED\\x07.py" in result.stdout

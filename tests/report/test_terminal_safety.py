"""Strings from outside (environment variables, saved reports, rule files) never reach a terminal
as control sequences: every text and Markdown reporter escapes them, coloured or plain."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cuda_doctor.compare.diff import diff_reports
from cuda_doctor.compare.fleet import compare_fleet
from cuda_doctor.core.checkreport import Report
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.reportfile import load_report
from cuda_doctor.core.results import Result, Status
from cuda_doctor.core.rules import parse_rule
from cuda_doctor.report import check as check_report
from cuda_doctor.report import compare as compare_report
from cuda_doctor.report import printable
from cuda_doctor.report.facts import render_facts_text
from cuda_doctor.report.rules import render_rule_markdown, render_rules
from cuda_doctor.report.watch import markdown as watch_markdown
from cuda_doctor.report.watch import text as watch_text
from cuda_doctor.watch.samples import Series
from cuda_doctor.watch.verdict import analyse

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
H200_FACTS = TESTS / "rules" / "h200_facts.json"

#: An OSC that sets the window title (ended by BEL), one that starts a hyperlink (ended by ST),
#: a CSI that clears the screen, a one-byte C1 CSI, a carriage return that overwrites the line,
#: a newline that forges one, and a right-to-left override.
HOSTILE = "\x1b]2;PWNED\x07\x1b]8;;http://x\x1b\\\x1b[2J\x9b31m\r\n[x] FORGED\u202e"
#: What rich itself writes for colour: SGR sequences, nothing else.
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")


def assert_inert(output: str) -> None:
    """Nothing in ``output`` acts on a terminal but colour, and the hostile text is shown, escaped."""
    bad = _CONTROL.findall(_SGR.sub("", output))
    assert not bad, f"control characters reach the terminal: {bad!r} in {output!r}"
    shown = _SGR.sub("", output)
    markdown_shows = re.sub(r"\\(.)", r"\1", shown)  # Markdown shows "\\x1b" and "\]" as "\x1b" and "]"
    assert "PWNED" in output and ("\\x1b]2;PWNED\\x07" in shown or "\\x1b]2;PWNED\\x07" in markdown_shows)
    assert not re.search(r"^\s*\[x\] FORGED", output, re.M), "a newline from outside forged a line"


def test_printable_escapes_controls_and_keeps_the_rest() -> None:
    assert printable("8× H200 — ✓ [ok]") == "8× H200 — ✓ [ok]"
    assert printable("a\x1b]2;t\x07b") == "a\\x1b]2;t\\x07b"
    assert printable("a\nb\tc") == "a\\x0ab\\x09c"
    assert printable("\x9b\u202e\u2028") == "\\x9b\\u202e\\u2028"
    assert printable("× ✓", ascii_only=True) == "\\xd7 \\u2713"


# -- every reporter, coloured and plain ---------------------------------------------------------


def hostile_check_report() -> Report:
    facts = Facts.from_dict(json.loads(H200_FACTS.read_text()))
    for name in ("driver.version", "driver.cuda_version", "gpu[0].name", "torch.version", "container.cuda_version"):
        facts.set(name, HOSTILE)
    facts.set("env.cuda_visible_devices", HOSTILE)
    facts.mark_unknown("toolkit.nvcc_version", HOSTILE)
    result = Result(
        "CD401",
        HOSTILE,
        "environment",
        Status.FAIL,
        f"CUDA_VISIBLE_DEVICES={HOSTILE}",
        subject=HOSTILE,
        fix=HOSTILE,
        commands=(HOSTILE,),
        links=(HOSTILE,),
        evidence={"env.cuda_visible_devices": HOSTILE},
    )
    skipped = Result("CD502", "t", "container", Status.SKIPPED, HOSTILE)
    return Report(facts=facts, results=[result, skipped], host=HOSTILE, problems=[HOSTILE])


@pytest.mark.parametrize("fmt", [name for name in check_report.FORMATS if name != "json"])
@pytest.mark.parametrize("terminal", [True, False])
def test_check_formats(fmt: str, terminal: bool) -> None:
    for verbose in (False, True):
        assert_inert(check_report.render(hostile_check_report(), fmt, verbose=verbose, terminal=terminal))


@pytest.mark.parametrize("color", [True, False])
def test_facts_text(color: bool) -> None:
    assert_inert(render_facts_text(hostile_check_report().facts, color))


def saved_report(tmp_path: Path, name: str, driver: str) -> Path:
    facts = json.loads(H200_FACTS.read_text())
    facts["values"].update({"driver.version": driver, "torch.version": HOSTILE, "system.hostname": HOSTILE})
    results = [
        {"rule": "CD401", "title": HOSTILE, "category": "environment", "status": "fail", "message": HOSTILE},
        {"rule": HOSTILE, "title": "t", "category": "gpu", "status": "fail", "message": "m", "subject": HOSTILE},
    ]
    data = {"schema": "cuda-doctor/report", "schema_version": 1, "host": HOSTILE, "facts": facts, "results": results}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("fmt", [name for name in compare_report.FORMATS if name != "json"])
@pytest.mark.parametrize("color", [True, False])
def test_diff_and_fleet_formats(tmp_path: Path, fmt: str, color: bool) -> None:
    before = load_report(saved_report(tmp_path, "before.json", "570.195.03"))
    after = load_report(saved_report(tmp_path, "after.json", HOSTILE))
    other = load_report(saved_report(tmp_path, "\x1b]2;PWNED\x07\r\n.json", "580.159.04"))  # a file name too
    assert_inert(compare_report.render_diff(diff_reports(before, after), fmt, color=color, width=120))
    fleet = compare_fleet([before, after, other], [], repeated=[HOSTILE])
    assert_inert(compare_report.render_fleet(fleet, fmt, color=color, width=120, all_nodes=True))


@pytest.mark.parametrize("color", [True, False])
def test_watch_formats(color: bool) -> None:
    series = Series.from_dict(json.loads((TESTS / "watch" / "fixtures" / "starved.json").read_text()))
    series = replace(
        series,
        command=("python", HOSTILE),
        gpus=tuple(replace(g, name=HOSTILE) for g in series.gpus),
        notes=(HOSTILE,),
    )
    analysis = analyse(series)
    assert_inert(watch_text.render(series, analysis, color=color))
    assert_inert(watch_markdown.render(series, analysis))


def test_rules_and_explain_of_a_hostile_rule_file() -> None:
    rule = parse_rule(
        {
            "id": "CDU001",
            "title": HOSTILE,
            "category": "environment",
            "rationale": "first line\nsecond " + HOSTILE.replace("\n", ""),  # a rationale has lines of its own
            "links": ["https://example.org"],
            "outcome": [{"when": {"fact": "a", "equals": 1}, "message": HOSTILE, "fix": HOSTILE}],
        },
        Path("CDU001.toml"),
    )
    for fmt in ("text", "markdown"):
        assert_inert(render_rules([rule], fmt))
    explained = render_rule_markdown(rule)
    assert_inert(explained)
    assert "first line\nsecond " in explained  # a rationale keeps its own lines


# -- end to end: the variables and the saved reports of the reported defects --------------------


def doctor(args: list[str], fake: object, cwd: Path, tty: bool = False, **env: str) -> tuple[int, str]:
    ctx = fake.ctx()  # type: ignore[attr-defined]
    full_env = {
        **ctx.env,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
        "COLUMNS": "200",
        **env,
    }
    argv = [sys.executable, "-m", "cuda_doctor", *args]
    if not tty:
        proc = subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=120)
        return proc.returncode, proc.stdout
    # a real terminal on stdout and stderr: rich colours the checklist and shows its progress line
    master, slave = pty.openpty()
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=full_env, cwd=cwd) as proc:
        os.close(slave)
        chunks = []
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                proc.kill()
                raise AssertionError("no output for 120 s")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        code = proc.wait(timeout=60)
    text = b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")
    # what rich writes to redraw its transient progress line: cursor moves, erase, hide/show cursor
    text = re.sub(r"\x1b\[\?25[lh]|\x1b\[2K|\x1b\[1A|\r", "", text)
    return code, text


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_cuda_visible_devices_with_an_osc_title(fake_nvidia_smi: object, tmp_path: Path, fmt: str) -> None:
    code, out = doctor(
        ["check", "--fast", "--format", fmt], fake_nvidia_smi, tmp_path, CUDA_VISIBLE_DEVICES=f"{HOSTILE}0"
    )
    assert code == 1  # CD401: the value names no GPU
    assert_inert(out)


def test_on_a_terminal_the_checklist_and_the_facts_are_escaped(fake_nvidia_smi: object, tmp_path: Path) -> None:
    code, out = doctor(["check", "--fast"], fake_nvidia_smi, tmp_path, tty=True, CUDA_VISIBLE_DEVICES=HOSTILE)
    assert code == 1
    assert_inert(out)
    code, out = doctor(["facts", "--fast"], fake_nvidia_smi, tmp_path, tty=True, CUDA_HOME=f"/opt/{HOSTILE}")
    assert code == 0
    assert_inert(out)


@pytest.mark.parametrize("tty", [False, True])
def test_a_saved_reports_hostname_in_fleet_and_diff(fake_nvidia_smi: object, tmp_path: Path, tty: bool) -> None:
    first = saved_report(tmp_path, "a.json", "570.195.03")
    second = saved_report(tmp_path, "b.json", "580.159.04")
    for args in (["diff", str(first), str(second)], ["fleet", str(tmp_path)]):
        for fmt in ("text", "markdown"):
            code, out = doctor([*args, "--format", fmt], fake_nvidia_smi, tmp_path, tty=tty)
            assert code in (0, 1), out
            assert_inert(out)


def test_rules_and_explain_of_a_hostile_user_rule_file(fake_nvidia_smi: object, tmp_path: Path) -> None:
    rules = tmp_path / "my-rules"
    rules.mkdir()
    title = json.dumps(HOSTILE)  # \uXXXX escapes, which TOML reads the same way
    (rules / "CDU001.toml").write_text(
        f'id = "CDU001"\ntitle = {title}\ncategory = "environment"\nrationale = "r"\n'
        'links = ["https://example.org"]\n[[outcome]]\nwhen = { fact = "a", equals = 1 }\nmessage = "m"\n',
        encoding="utf-8",
    )
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-doctor]\nrules-dirs = ["my-rules"]\n')
    for args in (["rules"], ["rules", "--format", "markdown"], ["explain", "CDU001"]):
        code, out = doctor(args, fake_nvidia_smi, tmp_path)
        assert code == 0, out
        assert_inert(out)

"""Every rule's messages read as sentences for people, whatever is known: rendered against a
healthy H200, an empty facts set, a --no-smoke and a --fast report, and every rule case, no
text shows a bare "?", a fact's dotted name, a ``<placeholder>`` or "None"."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.base.tomlcompat import tomllib
from cuda_doctor.core.config import Config
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import judge_facts, run_check
from cuda_doctor.core.results import Result
from cuda_doctor.core.rules import Rule, condition_facts, load_rules, template_facts
from cuda_doctor.report.rules import render_rule_markdown
from tests.rules.case_facts import apply_case

HERE = Path(__file__).parent
RULES = load_rules()


def _fact_names(rules: list[Rule]) -> set[str]:
    """Every fact name the rules read or show, without indices: what a message must never print."""
    same = lambda name: name  # noqa: E731
    names: set[str] = set()
    for rule in rules:
        if rule.kind != "env":
            continue
        names.update(rule.requires)
        names.update(template_facts([rule.pass_message, rule.skip_message], same))
        if rule.applies is not None:
            names.update(condition_facts(rule.applies, same))
        for outcome in rule.outcomes:
            names.update(condition_facts(outcome.when, same))
            names.update(template_facts([outcome.message, outcome.fix or "", *outcome.commands], same))
    return {re.sub(r"\[\d+\]", "", name) for name in names}


FACT_NAMES = _fact_names(RULES)
#: What a template may name, lint captures too: "<amp_fix>" is one left unfilled, "<os>" is prose.
TEMPLATE_NAMES = {
    name
    for rule in RULES
    for template in [
        rule.message,
        rule.fix or "",
        *(o.message for o in rule.outcomes),
        *(o.fix or "" for o in rule.outcomes),
    ]
    for name in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)
}
_DOTTED = re.compile(r"\b[a-z][a-z_]*(?:\[\d+\])?(?:\.[a-z_][a-z0-9_]*(?:\[\d+\])?)+")
_LONE_MARK = re.compile(r"(?:^|[\s(:=])\?(?:$|[\s),.;])")


def problems(text: str) -> list[str]:
    found = []
    if _LONE_MARK.search(text):
        found.append("a bare '?'")
    for name in _DOTTED.findall(text):
        bare = re.sub(r"\[\d+\]", "", name)
        if bare in FACT_NAMES or bare.startswith(("derived.", "probe.")):
            found.append(f"the fact name {name}")
    if re.search(r"\{[a-z_][a-z0-9_.\[\]]*\}", text) or set(re.findall(r"<([a-z_]+)>", text)) & TEMPLATE_NAMES:
        found.append("a placeholder")
    if re.search(r"\bNone\b", text):
        found.append("None")
    if re.search(r"(?:^|: )unknown$", text):
        found.append("'unknown' without why")
    return found


def assert_readable(label: str, results: list[Result]) -> None:
    bad = []
    for r in results:
        for field, text in (("message", r.message), ("fix", r.fix or ""), *(("command", c) for c in r.commands)):
            for problem in problems(text):
                bad.append(f"{label} {r.rule_id} {r.subject or ''} {field}: {problem}: {text!r}")
    assert not bad, "\n".join(bad)


def h200() -> Facts:
    return Facts.from_dict(json.loads((HERE / "h200_facts.json").read_text()))


def judged(facts: Facts) -> list[Result]:
    results, problems_met = judge_facts(facts, Config(), rules=RULES)
    assert problems_met == []
    return results


def test_the_checks_own_words_are_caught() -> None:
    """The checks below can fail: each defect seen in a message is found."""
    assert problems("could not check: driver.status was not gathered") == ["the fact name driver.status"]
    assert problems("the driver was not tested: ?") == ["a bare '?'"]
    assert problems("(this machine has ?)") == ["a bare '?'"]
    assert problems("To train in mixed precision, <amp_fix>.") == ["a placeholder"]
    assert problems("could not check: unknown") == ["'unknown' without why"]
    assert problems("is it a working Python?") == []  # a question is not a missing value


def test_a_healthy_h200() -> None:
    assert_readable("H200", judged(h200()))


def test_nothing_known() -> None:
    assert_readable("empty", judged(Facts()))


def _live(fake: Any, tmp_path: Path, **options: Any) -> list[Result]:
    ctx = fake.ctx().but(
        python=sys.executable,
        env={
            **fake.ctx().env,
            "CUDA_DOCTOR_DISABLE_NVML": "1",
            "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
            "HOME": str(tmp_path),
        },
        **options,
    )
    report = run_check(ctx, Config())
    # saved and judged again, as check --facts does
    saved = Facts.from_dict(json.loads(json.dumps(report.facts.to_dict())))
    return [*report.results, *judged(saved)]


def test_a_no_smoke_report(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    assert_readable("--no-smoke", _live(fake_nvidia_smi, tmp_path, smoke=False))


def test_a_fast_report(fake_nvidia_smi: Any, tmp_path: Path) -> None:
    assert_readable("--fast", _live(fake_nvidia_smi, tmp_path, fast=True, smoke=False))


def _cases() -> Iterator[Any]:
    for path in sorted((HERE / "cases").glob("*.toml")):
        for case in tomllib.loads(path.read_text())["case"]:
            yield pytest.param(case, id=f"{path.stem}-{case['name']}")


@pytest.mark.parametrize("case", list(_cases()))
def test_every_rule_case(case: dict[str, Any]) -> None:
    """Each case's facts, judged by every rule (not only the one the case is about)."""
    assert_readable(case["name"], judged(apply_case(h200(), case)))


@pytest.mark.parametrize("rule", RULES, ids=[rule.id for rule in RULES])
def test_explain(rule: Rule) -> None:
    """A lint rule's placeholders are shown in words, not as ``<amp_fix>``."""
    text = render_rule_markdown(rule)
    if rule.kind == "lint":
        assert not set(re.findall(r"<([a-z_]+)>", text)) & TEMPLATE_NAMES, text
        assert not re.search(r"\{[a-z_]+\}", text), text

"""The detector registry: every detector's rule is loaded, and no finding is dropped for want of one."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.core.detectors import DETECTORS
from cuda_doctor.lint.engine import LintOptions, MissingRuleError, builtin_rules, lint_paths, lint_rules


def test_every_detector_has_its_shipped_rule() -> None:
    rules = builtin_rules()
    assert {rule.detector: rule.id for rule in rules.values()} == DETECTORS


def test_a_detector_without_its_rule_is_an_internal_error_naming_the_id() -> None:
    without = [rule for rule in builtin_rules().values() if rule.id != "CDL010"]
    with pytest.raises(MissingRuleError, match="'cudnn_benchmark' reports CDL010, but no rule CDL010"):
        lint_rules(without)


def test_a_hit_without_a_rule_is_an_internal_error_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    without = {rule_id: rule for rule_id, rule in builtin_rules().items() if rule_id != "CDL001"}
    for options in (LintOptions(), LintOptions(ignore=("CDL001",))):  # ignoring it does not hide it
        with pytest.raises(MissingRuleError, match="reported CDL001, which has no rule"):
            lint_paths([tmp_path / "t.py"], options, without)
    assert [f.rule_id for f in lint_paths([tmp_path / "t.py"]).findings] == ["CDL001"]

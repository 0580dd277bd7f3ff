"""Per-rule fixture files: ``expect: ID`` marks each line that must fire; nothing else may.

``expect-next: ID`` (Dockerfiles, where comments take a whole line) marks the next line and
``expect-prev: ID`` the previous one.  Each case is linted alone in a temporary directory so
that the rest of this repository does not count as "the project"; a case in a folder of its own
is copied with the other files of that folder (its project: e.g. the requirements that pin torch).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from cuda_doctor.core.rules import RuleFileError, load_rule_file
from cuda_doctor.lint.engine import LintOptions, builtin_rules, lint_paths
from cuda_doctor.lint.requirements import caps_below

CASES = Path(__file__).parent / "cases"
EXPECT = re.compile(r"expect(?P<where>-next|-prev)?: (?P<ids>CDL\d{3}(?:,CDL\d{3})*)")


def every_rule() -> LintOptions:
    """All rules, the opt-in ones too (named by id): the cases show what each one finds."""
    return LintOptions(select=("CDL", *(rule.id for rule in builtin_rules().values() if rule.opt_in)))


def case_files() -> list[Path]:
    return sorted(p for p in CASES.rglob("*") if p.is_file())


def expected(path: Path) -> set[tuple[int, str]]:
    out: set[tuple[int, str]] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for match in EXPECT.finditer(line):
            offset = {"-next": 1, "-prev": -1}.get(match.group("where") or "", 0)
            out.update((number + offset, rule) for rule in match.group("ids").split(","))
    return out


def copy_case(case: Path, tmp_path: Path) -> Path:
    """The case, with its sibling files when it sits in a folder of its own."""
    target = tmp_path / case.relative_to(CASES)
    target.parent.mkdir(parents=True, exist_ok=True)
    if case.parent != CASES:
        shutil.copytree(case.parent, target.parent, dirs_exist_ok=True)
    shutil.copy(case, target)
    return target


@pytest.mark.parametrize("case", case_files(), ids=lambda p: str(p.relative_to(CASES)))
def test_case(case: Path, tmp_path: Path) -> None:
    target = copy_case(case, tmp_path)
    report = lint_paths([target], every_rule())
    found = {(f.line, f.rule_id) for f in report.findings}
    assert found == expected(case), "\n".join(f"{f.line}:{f.column} {f.rule_id} {f.message}" for f in report.findings)


def test_every_rule_has_a_firing_case() -> None:
    fired = {rule for case in case_files() for _, rule in expected(case)}
    # CDL000 (could not lint) also has its own tests: test_lint_bad_input.py
    assert set(builtin_rules()) - {"CDL000"} == fired - {"CDL000"}


def test_messages_have_no_unfilled_placeholders(tmp_path: Path) -> None:
    for case in case_files():
        target = tmp_path / case.name
        shutil.copy(case, target)
    report = lint_paths([tmp_path], every_rule())
    assert report.findings
    for finding in report.findings:
        assert "{" not in finding.message.replace("{base|runtime|devel}", ""), finding
        assert "?" not in re.findall(r"`\?`", finding.message)
        assert finding.fix


def test_rule_metadata_is_complete() -> None:
    for rule in builtin_rules().values():
        assert rule.links and all(link.startswith("https://") for link in rule.links), rule.id
        assert rule.category in ("code", "docker", "dependencies"), rule.id
        assert len(rule.rationale) > 60, rule.id


def test_amp_in_another_file_does_not_silence_this_script(tmp_path: Path) -> None:
    # CDL003 is judged per entry point: the autocast of another script is not this one's.
    (tmp_path / ".git").mkdir()
    (tmp_path / "amp_utils.py").write_text("import torch\nctx = torch.autocast('cuda', dtype=torch.bfloat16)\n")
    train = tmp_path / "train.py"
    shutil.copy(CASES / "no_amp_torch.py", train)
    assert [f.rule_id for f in lint_paths([train], every_rule()).findings] == ["CDL003"]
    assert [f.rule_id for f in lint_paths([tmp_path], every_rule()).findings] == ["CDL003"]


def test_an_opt_in_rule_runs_only_when_named_by_its_id(tmp_path: Path) -> None:
    train = copy_case(CASES / "no_amp_torch.py", tmp_path)
    assert builtin_rules()["CDL003"].opt_in
    assert lint_paths([train]).findings == []  # off by default
    for select in (("CDL",), ("code",), ("CDL0",)):  # a prefix or a category does not turn it on
        assert lint_paths([train], LintOptions(select=select)).findings == [], select
    for select in (("CDL003",), ("CDL", "cdl003")):
        assert [f.rule_id for f in lint_paths([train], LintOptions(select=select)).findings] == ["CDL003"]
    assert lint_paths([train], LintOptions(select=("CDL003",), ignore=("CDL003",))).findings == []


def test_stage_reference_and_build_arg_substitution(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "ARG BASE=nvidia/cuda:11.2.0-devel-ubuntu20.04\n"
        "FROM ${BASE} AS build\n"
        "FROM build\n"
        "RUN pip install torch==2.9.0 --index-url https://download.pytorch.org/whl/cu130\n"
    )
    found = [(f.line, f.rule_id) for f in lint_paths([dockerfile]).findings]
    assert found == [(2, "CDL102"), (4, "CDL105")]


def test_requirements_referenced_by_the_dockerfile(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.6.0+cu124\n")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM nvidia/cuda:13.0.2-devel-ubuntu22.04\nCOPY requirements.txt .\nRUN pip install -r requirements.txt\n"
    )
    findings = lint_paths([dockerfile]).findings
    assert [(f.line, f.rule_id) for f in findings] == [(3, "CDL105")]
    assert "CUDA 12.4" in findings[0].message and "13.0.2" in findings[0].message


def _lint_case(name: str, tmp_path: Path) -> list[tuple[int, str, str, str, str]]:
    target = copy_case(CASES / name, tmp_path)
    return [(f.line, f.rule_id, f.severity, f.message, f.fix or "") for f in lint_paths([target]).findings]


def test_index_url_suggests_variants_of_the_pinned_release(tmp_path: Path) -> None:
    # torch 2.1 ships cu118 and cu121 only: "e.g. cu124" (the variant nearest cu123) is wrong.
    findings = _lint_case("index_pinned/requirements.txt", tmp_path)
    assert [f[:2] for f in findings] == [(1, "CDL201")]  # the pin that takes the index's variant: not again
    index = [f for f in findings if f[0] == 1]
    _, _, _, message, fix = index[0]
    assert "torch 2.1 has no cu123 wheels (it ships cu118, cu121)" in message
    assert "`torch==2.1.0`" in message
    assert "whl/cu121" in fix and "whl/cu118" in fix and "cu124" not in fix


def test_index_url_takes_the_release_pinned_elsewhere_in_the_project(tmp_path: Path) -> None:
    findings = _lint_case("index_project_pin/requirements.txt", tmp_path)
    assert [f[:2] for f in findings] == [(2, "CDL201")]
    _, _, _, message, fix = findings[0]
    assert "torch 2.1 has no cu123 wheels" in message and "(pyproject.toml)" in message
    assert "whl/cu121" in fix and "cu124" not in fix


def test_index_url_without_a_pin_may_suggest_any_variant(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("--extra-index-url https://download.pytorch.org/whl/cu123\n")
    (finding,) = lint_paths([requirements]).findings
    assert "no torch release ships cu123" in finding.message
    assert finding.fix is not None and "e.g. cu124" in finding.fix


@pytest.mark.parametrize("case", ["amp_pinned/train.py", "amp_capped/train_capped.py"])
def test_deprecated_amp_under_a_pin_below_2_4_says_upgrade_first(case: str, tmp_path: Path) -> None:
    findings = _lint_case(case, tmp_path)
    assert [f[:3] for f in findings] == [(4, "CDL001", "info"), (9, "CDL001", "info")]
    pin = "`torch==2.1.0 (requirements.txt)`" if "pinned" in case else "`torch<2.4,>=2.0 (pyproject.toml)`"
    for _, _, _, message, fix in findings:
        assert "deprecated from torch 2.4" in message and pin in message
        assert fix.startswith("Upgrade torch (≥ 2.4), then use `torch.amp.")


def test_deprecated_amp_without_a_pin_keeps_the_replacement(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=2.0\n")  # no upper bound: not a pin
    train = tmp_path / "train.py"
    shutil.copy(CASES / "amp_pinned" / "train.py", train)
    findings = lint_paths([train]).findings
    assert [(f.line, f.severity) for f in findings] == [(4, "warning"), (9, "warning")]
    assert findings[0].message.endswith("is deprecated (FutureWarning since torch 2.4)")
    assert findings[0].fix == 'Use `torch.amp.GradScaler("cuda", ...)`.'


@pytest.mark.parametrize(
    ("spec", "capped"),
    [
        ("torch==2.1.0", True),
        ("torch==2.3.1+cu121", True),
        ("torch<2.4", True),
        ("torch>=2.0,<2.3", True),
        ("torch==2.3.*", True),
        ("torch~=2.3.1", True),
        ("torch<=2.4", False),
        ("torch<2.4.1", False),
        ("torch~=2.3", False),
        ("torch==2.*", False),
        ("torch>=2.0", False),
        ("torch==2.4.0", False),
        ("torch", False),
    ],
)
def test_caps_below_2_4(spec: str, capped: bool) -> None:
    assert caps_below(Requirement(spec), Version("2.4")) is capped


def test_a_yaml_named_on_the_command_line_is_not_read_as_python(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text("model:\n  layers: 12\n  run: python -m torch.distributed.launch train.py\n")
    report = lint_paths([config])
    assert report.files == 1 and report.findings == []


def test_the_stable_tf_api_fix_drops_loss_scale(tmp_path: Path) -> None:
    fixes = {f.line: f.fix or "" for f in lint_paths([copy_case(CASES / "tf_alias.py", tmp_path)]).findings}
    assert fixes[4] == "Use `tf.keras.mixed_precision.Policy` with the same arguments (available since TensorFlow 2.4)."
    assert "Policy('mixed_float16')`; the stable Policy takes no `loss_scale`" in fixes[5]
    assert "LossScaleOptimizer(optimizer)` instead" in fixes[5]
    assert fixes[6].startswith("Use `tf.keras.mixed_precision.set_global_policy`")
    assert fixes[7].startswith("Use `tf.keras.mixed_precision.LossScaleOptimizer(opt)`: dynamic loss scaling")
    (tmp_path / "fixed.py").write_text(
        "import tensorflow as tf\n"
        "opt = tf.keras.mixed_precision.experimental.LossScaleOptimizer(opt, 128)\n"
        "p = tf.keras.mixed_precision.experimental.Policy('mixed_float16', loss_scale=None)\n"
    )
    fixes = {f.line: f.fix or "" for f in lint_paths([tmp_path / "fixed.py"]).findings}
    assert "LossScaleOptimizer(opt, dynamic=False, initial_scale=128)" in fixes[2]
    assert "Policy('mixed_float16')`: drop `loss_scale=None`" in fixes[3]


def test_opt_in_must_be_true_or_false(tmp_path: Path) -> None:
    text = (CASES.parent.parent.parent / "rules" / "CDL003.toml").read_text(encoding="utf-8")
    bad = tmp_path / "CDL003.toml"
    bad.write_text(text.replace("opt_in = true", 'opt_in = "yes"'), encoding="utf-8")
    with pytest.raises(RuleFileError, match="field 'opt_in' must be true or false"):
        load_rule_file(bad)
    bad.write_text(text.replace("opt_in = true", "opt_in = false"), encoding="utf-8")
    assert not load_rule_file(bad).opt_in


def test_local_rank_is_reported_only_where_the_flag_is_the_rank(tmp_path: Path) -> None:
    [finding] = lint_paths([copy_case(CASES / "local_rank_read.py", tmp_path)]).findings
    assert finding.severity.value == "warning" and "never reads LOCAL_RANK" in finding.message
    head = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--local_rank', type=int, default=0)\n"
    reads = {
        "attribute.py": "a = p.parse_args()\ndevice = a.local_rank\n",
        "getattr.py": "a = p.parse_args()\ndevice = getattr(a, 'local_rank')\n",
        "vars.py": "a = p.parse_args()\ndevice = vars(a)['local_rank']\n",
    }
    for name, tail in reads.items():
        (tmp_path / name).write_text(head + tail)
        assert [f.rule_id for f in lint_paths([tmp_path / name]).findings] == ["CDL007"], name
    quiet = {
        "unread.py": "a = p.parse_args()\nprint(a.lr)\n",
        "helper.py": "from utils import init_distributed_mode\ninit_distributed_mode(p.parse_args())\n",
        "environment.py": "import os\na = p.parse_args()\nrank = int(os.environ.get('LOCAL_RANK', a.local_rank))\n",
    }
    for name, tail in quiet.items():
        (tmp_path / name).write_text(head + tail)
        assert lint_paths([tmp_path / name]).findings == [], name
    (tmp_path / "requirements.txt").write_text("deepspeed>=0.14\n")
    plain = tmp_path / "plain.py"
    plain.write_text(head + "device = p.parse_args().local_rank\n")
    assert lint_paths([plain]).findings == []  # a project that requires deepspeed: its launcher passes it


def test_visible_devices_fix_gives_a_value_of_that_variable(tmp_path: Path) -> None:
    fixes = {f.line: f.fix or "" for f in lint_paths([copy_case(CASES / "visible_devices.py", tmp_path)]).findings}
    assert "`CUDA_VISIBLE_DEVICES=0 python train.py`" in fixes[10]
    assert "`CUDA_DEVICE_ORDER=PCI_BUS_ID python train.py`" in fixes[11]


def test_a_notebook_magic_keeps_the_rest_of_its_cell_checked(tmp_path: Path) -> None:
    findings = lint_paths([copy_case(CASES / "ipython.ipynb", tmp_path)]).findings
    [cdl000] = [f for f in findings if f.rule_id == "CDL000"]
    assert "cell 12" in cdl000.message  # the real syntax error only: magics, placeholders, output are not
    assert {f.rule_id for f in findings} == {"CDL000", "CDL001", "CDL006"}


def test_a_variant_missing_from_an_incomplete_release_row_is_not_called_nonexistent(tmp_path: Path) -> None:
    # torch 2.14's row lists cu126, cu130 and cu132, and says a cu134 build may have shipped too
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.14.0+cu134\ntorch==2.13.0+cu134\n")
    findings = [f for f in lint_paths([requirements]).findings if f.rule_id == "CDL201"]
    assert [f.line for f in findings] == [2]

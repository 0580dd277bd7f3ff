"""A file's project: its own pins and base image, the same findings alone and with its repository."""

from __future__ import annotations

import shutil
from pathlib import Path

from cuda_doctor.lint.engine import lint_paths

CASES = Path(__file__).parent / "cases"


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(CASES / name, target)
    return target


def _by_file(findings: list) -> dict[str, list[tuple[int, str, str, str]]]:
    out: dict[str, list[tuple[int, str, str, str]]] = {}
    for f in findings:
        out.setdefault(Path(f.path).name, []).append((f.line, f.rule_id, f.severity.value, f.message))
    return out


def test_a_sibling_sub_projects_pin_does_not_apply(tmp_path: Path) -> None:
    root = _copy("pin_scope", tmp_path)
    (root / ".git").mkdir()
    found = _by_file(lint_paths([root]).findings)
    [(_, rule_a, severity_a, message_a)] = found["train_a.py"]
    [(_, rule_b, severity_b, message_b)] = found["train_b.py"]
    assert (rule_a, severity_a) == ("CDL001", "info") and "torch==1.13.1 (requirements.txt)" in message_a
    assert (rule_b, severity_b) == ("CDL001", "warning") and "pins" not in message_b


def test_each_file_alone_gets_the_findings_of_the_whole_run(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(CASES, root)
    (root / ".git").mkdir()
    whole = lint_paths([root]).findings
    files = sorted({Path(f.path) for f in whole} | {p for p in root.rglob("*.py")})
    for path in files:
        alone = [(f.line, f.rule_id, f.severity, f.message) for f in lint_paths([path]).findings]
        expected = [(f.line, f.rule_id, f.severity, f.message) for f in whole if Path(f.path) == path]
        assert alone == expected, path


def test_the_base_image_of_the_project_is_where_torch_comes_from(tmp_path: Path) -> None:
    root = _copy("ngc_image", tmp_path)
    found = _by_file(lint_paths([root]).findings)
    [(_, rule, severity, message)] = found["train.py"]
    assert (rule, severity) == ("CDL001", "info")
    assert "base image `nvcr.io/nvidia/pytorch:21.12-py3`" in message and "does not know" in message
    [(_, rule, severity, message)] = found["run.sh"]
    assert (rule, severity) == ("CDL006", "info") and "nvcr.io/nvidia/pytorch:21.12-py3" in message
    assert "Dockerfile" not in found  # an NGC image with a tag: nothing to report about it


def test_a_pin_below_the_removal_makes_a_removed_api_a_note(tmp_path: Path) -> None:
    jax = _by_file(lint_paths([_copy("jax_pinned", tmp_path)]).findings)["model.py"]
    assert [(rule, severity) for _, rule, severity, _ in jax] == [("CDL012", "info")]
    tf = _by_file(lint_paths([_copy("tf_pinned", tmp_path)]).findings)["train.py"]
    assert [(rule, severity) for _, rule, severity, _ in tf] == [("CDL002", "warning")]
    assert "tensorflow==2.8.0 (requirements.txt)" in tf[0][3]


def test_an_unpinned_removed_api_is_an_error(tmp_path: Path) -> None:
    shutil.copy(CASES / "jax_removed.py", tmp_path / "model.py")
    shutil.copy(CASES / "tf_alias.py", tmp_path / "train.py")
    severities = {(f.rule_id, f.severity.value) for f in lint_paths([tmp_path]).findings}
    assert severities == {("CDL012", "error"), ("CDL002", "error")}


def test_a_launcher_under_a_torch_without_the_deprecation_is_not_reported(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.8.1\n")
    (tmp_path / "run.sh").write_text("python -m torch.distributed.launch --nproc_per_node 2 train.py\n")
    assert lint_paths([tmp_path / "run.sh"]).findings == []
    (tmp_path / "requirements.txt").write_text("torch==1.9.1\n")
    [finding] = lint_paths([tmp_path / "run.sh"]).findings
    assert finding.severity.value == "info" and "On torch 1.10 or newer" in (finding.fix or "")


def test_tests_are_judged_by_their_path_inside_the_checkout(tmp_path: Path) -> None:
    # a checkout below a folder called tests is not test code
    root = tmp_path / "tests" / "project"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    shutil.copy(CASES / "dataloader" / "train_images.py", root / "src" / "train.py")
    assert {f.rule_id for f in lint_paths([root]).findings} == {"CDL008", "CDL009"}
    (root / "tests").mkdir()
    shutil.move(root / "src" / "train.py", root / "tests" / "train.py")
    assert lint_paths([root]).findings == []

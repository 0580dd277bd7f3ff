"""DataLoader rules (CDL008, CDL009) beyond the cases: what silences a case is the reason it names."""

from __future__ import annotations

from pathlib import Path

from cuda_doctor.lint.engine import lint_paths

CASES = Path(__file__).parent / "cases"


def test_a_from_pretrained_model_is_what_silences_both_loader_rules(tmp_path: Path) -> None:
    source = (CASES / "dataloader" / "finetune_pretrained_ok.py").read_text(encoding="utf-8")
    assert source.count("from_pretrained") == 2
    script = tmp_path / "train.py"
    script.write_text(source, encoding="utf-8")
    assert lint_paths([script]).findings == []
    # the same script with models built from their configs: both loaders are reported
    script.write_text(source.replace("from_pretrained", "from_config"), encoding="utf-8")
    found = {(f.rule_id, f.line) for f in lint_paths([script]).findings}
    lines = source.splitlines()
    train = next(n for n, line in enumerate(lines, 1) if line.lstrip().startswith("train_loader = DataLoader("))
    extra = next(n for n, line in enumerate(lines, 1) if line.lstrip().startswith("extra_loader = DataLoader("))
    assert found == {("CDL008", train), ("CDL009", extra)}

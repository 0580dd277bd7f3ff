"""[tool.cuda-doctor] configuration: discovery, fields, and errors that name file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.core.config import ConfigError, load_config


def test_found_in_nearest_pyproject(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cuda-doctor]\nselect = ["cd1"]\nignore = ["CD503"]\nseverity = { CD502 = "warning" }\n'
        'rules-dirs = ["rules"]\nfail-on = "warning"\n'
    )
    sub = tmp_path / "src" / "pkg"
    sub.mkdir(parents=True)
    config = load_config(None, sub)
    assert config.select == ("CD1",)
    assert config.ignore == ("CD503",)
    assert config.severity == {"CD502": "warning"}
    assert config.rules_dirs == ((tmp_path / "rules").resolve(),)
    assert config.fail_on == "warning"


def test_pyproject_without_section_is_empty(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert load_config(None, tmp_path).select == ()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[tool.cuda-doctor]\nseverity = { CD502 = "loud" }\n', "severity.CD502"),
        ('[tool.cuda-doctor]\nselect = "CD1"\nignore = [1]\n', "ignore"),
        ('[tool.cuda-doctor]\nrules-dirs = ["nope"]\n', "rules-dirs"),
        ('[tool.cuda-doctor]\nselct = ["CD1"]\n', "selct"),
        ('[tool.cuda-doctor]\nfail-on = "sometimes"\n', "fail-on"),
        ('[tool.cuda-doctor]\ngpu-min-free-percent = "5%"\n', "gpu-min-free-percent"),
        ("[tool.cuda-doctor]\ngpu-min-free-percent = 100\n", "gpu-min-free-percent"),
        ("[tool.cuda-doctor]\ngpu-min-free-percent = true\n", "gpu-min-free-percent"),
    ],
)
def test_errors_name_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, tmp_path)
    assert str(path) in str(info.value) and field in str(info.value)


def test_not_toml(tmp_path: Path) -> None:
    path = tmp_path / "doctor.toml"
    path.write_text("select = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path, tmp_path)


def test_explicit_file_with_top_level_keys(tmp_path: Path) -> None:
    path = tmp_path / "doctor.toml"
    path.write_text('ignore = ["CD4"]\n')
    assert load_config(path, tmp_path).ignore == ("CD4",)


def test_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml", tmp_path)


def test_the_gpu_memory_floor_is_a_fact_the_rules_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.cuda-doctor]\ngpu-min-free-percent = 12\n")
    config = load_config(None, tmp_path)
    assert config.gpu_min_free_percent == 12.0
    assert config.facts() == {"config.gpu_min_free_percent": 12.0}
    (tmp_path / "pyproject.toml").write_text("[tool.cuda-doctor]\n")
    assert load_config(None, tmp_path).facts() == {}  # the rule's table gives the default

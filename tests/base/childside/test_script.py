"""What every smoke script shares, run as the scripts run: composed into one source, in a real
interpreter."""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest

from cuda_doctor.base import children
from cuda_doctor.smoke.runner import script_source

ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


@pytest.mark.parametrize("level", ["driver", "framework", "jax"])
def test_each_smoke_script_composes_into_one_python_38_source(level: str) -> None:
    composed = script_source(level)
    tree = ast.parse(composed, feature_version=(3, 8))
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(str(module).startswith("cuda_doctor") for module in imported)
    assert {"emit", "step", "script_main"} <= set(names)  # the shared ones, once


def _script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "some_level.py"
    script.write_text(
        "from cuda_doctor.base.childside.script import error_text, script_main, step\n\n\n" + body, encoding="utf-8"
    )
    children.compose.cache_clear()
    try:
        return children.compose(script)
    finally:
        children.compose.cache_clear()


def test_a_script_starts_steps_and_ends_with_its_result(tmp_path: Path) -> None:
    source = _script(
        tmp_path,
        "def run(config):\n    step('count')\n    return {'status': 'ok', 'n': config['n']}\n\n\nscript_main(run)\n",
    )
    result = children.run(sys.executable, source, [json.dumps({"n": 3})], env=ENV, timeout=30)
    assert children.parse_records(result.stdout) == [
        {"started": True},
        {"step": "count"},
        {"result": {"status": "ok", "n": 3}},
    ]


def test_an_unforeseen_failure_is_a_result_in_few_words(tmp_path: Path) -> None:
    body = "def run(config):\n    raise RuntimeError('first\\n\\nsecond\\nthird\\nfourth')\n\n\nscript_main(run)\n"
    result = children.run(sys.executable, _script(tmp_path, body), env=ENV, timeout=30)
    assert children.parse_records(result.stdout)[-1] == {
        "result": {"status": "failed", "error": "RuntimeError: first second third", "devices": []}
    }


def test_a_run_told_to_end_prints_no_result(tmp_path: Path) -> None:
    result = children.run(sys.executable, _script(tmp_path, "script_main(lambda config: None)\n"), env=ENV, timeout=30)
    assert children.parse_records(result.stdout) == [{"started": True}]

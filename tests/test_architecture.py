"""The import contracts in pyproject.toml hold for this tree, and fail when an import points up
or closes a cycle (a copy of the package with one planted import)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent))


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    assert LINT_IMPORTS is not None, "import-linter is a test dependency: pip install -e '.[test]'"
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(root), "LANG": "C.UTF-8"}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package and its contracts with ``line`` added at the top of ``module``."""
    shutil.copytree(REPO / "cuda_doctor", tmp_path / "cuda_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(line + "\n" + target.read_text(encoding="utf-8"), encoding="utf-8")
    return tmp_path


def test_the_tree_keeps_its_contracts() -> None:
    proc = lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 2 kept, 0 broken." in proc.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # base imports a command: an upward import, even inside a function
        (
            "cuda_doctor/base/atomic.py",
            "def _late() -> None:\n    from cuda_doctor.commands import check  # noqa",
            "Layers: imports only point down BROKEN",
        ),
        # two domains of one layer import each other's modules
        ("cuda_doctor/gpu/probe.py", "import cuda_doctor.host.derive", "Layers: imports only point down BROKEN"),
        # a module inside a package imports one that imports it
        (
            "cuda_doctor/core/results.py",
            "import cuda_doctor.core.rules",
            "No import cycles between modules or packages BROKEN",
        ),
    ],
)
def test_a_planted_import_breaks_a_contract(tmp_path: Path, module: str, line: str, broken: str) -> None:
    proc = lint_imports(planted(tmp_path, module, line))
    assert proc.returncode != 0
    assert broken in proc.stdout, proc.stdout + proc.stderr

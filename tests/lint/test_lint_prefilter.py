"""The byte pre-filter never skips a file that has a finding (checked on every Python case)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_doctor.lint.apis import jax_removed
from cuda_doctor.lint.prefilter import needs_ast
from cuda_doctor.lint.project import ProjectContext
from cuda_doctor.lint.python_ast import lint_source

CASES = Path(__file__).parent / "cases"
PYTHON = sorted(p for p in CASES.rglob("*.py"))


@pytest.mark.parametrize("case", PYTHON, ids=lambda p: str(p.relative_to(CASES)))
def test_a_file_with_findings_is_parsed(case: Path) -> None:
    data = case.read_bytes()
    relative = case.relative_to(CASES).as_posix()
    hits = lint_source(data.decode("utf-8"), relative, ProjectContext(), data)
    if hits:
        assert needs_ast(data, relative), [h.rule_id for h in hits]


@pytest.mark.parametrize(
    "source",
    [
        "import torch.cuda as C\nwith C.amp.autocast():\n    pass\n",
        "from torch.cuda import (\n    amp,\n)\nscaler = amp.GradScaler()\n",
        "from torch import autocast as ac\nimport torch\nm = torch.nn.Linear(1, 1).cuda()\n"
        "opt = torch.optim.SGD(m.parameters(), 0.1)\n"
        "def step(x):\n    with ac('cuda'):\n        loss = m(x).sum()\n    loss.backward()\n    opt.step()\n",
        "import os\nimport torch\nx = torch.ones(1).cuda()\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
        "from jax import tree_map\n",
        "import torch\nmodel = torch.nn.Linear(1, 1).cuda()\noptimizer = torch.optim.SGD(model.parameters(), 0.1)\n"
        "for _ in range(2):\n    loss = model(torch.ones(1, 1).cuda()).sum()\n"
        "    loss . backward ()\n    optimizer.step()\n",
    ],
)
def test_spellings_that_reach_an_api_are_parsed(source: str) -> None:
    data = source.encode()
    assert lint_source(source, "train.py", ProjectContext(), data), "the snippet should have a finding"
    assert needs_ast(data, "train.py")


def test_every_removed_jax_name_is_parsed() -> None:
    exact, modules = jax_removed()
    for api in (*exact.values(), *modules):
        module, _, name = api.old.removesuffix(".*").rpartition(".")
        source = f"import jax\nfrom {module} import {name}\n"
        assert lint_source(source, "m.py", ProjectContext(), source.encode()), source
        assert needs_ast(source.encode(), "m.py"), source


def test_files_without_the_words_are_skipped() -> None:
    assert not needs_ast(b"import torch\n\nx = torch.ones(3)\nprint(x.sum())\n", "util.py")
    assert not needs_ast(b'"""Call loss.backward() then optimizer.step() on cuda."""\n', "doc.py")

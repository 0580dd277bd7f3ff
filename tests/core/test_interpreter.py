"""Which interpreter a check inspects: real virtual environments, PATH and the activation variables
given as parameters, never this host's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_doctor.base.errors import UserError
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.interpreter import (
    Interpreter,
    candidates,
    choose,
    installed_frameworks,
    probe,
    record,
    validate,
)


def make_venv(root: Path, *frameworks: str) -> Path:
    """A real venv (no pip) whose site-packages holds the metadata folder of each distribution
    named, as pip leaves it (``torch-2.11.0.dist-info``): the interpreter in its bin/."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    (site,) = root.glob("lib/python*/site-packages")
    for name in frameworks:
        (site / f"{name.replace('-', '_')}-2.11.0.dist-info").mkdir()
    return root / "bin" / "python"


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cuda-doctor's own environment: a venv with no framework."""
    return make_venv(tmp_path_factory.mktemp("own") / "venv")


def prefix(python: Path) -> str:
    return str(python.parent.parent)


def chosen(own: Path, env: dict[str, str], given: str | None = None) -> tuple[str, str, str]:
    found = choose(given, running=str(own), running_prefix=prefix(own), env=env, timeout=10)
    return found.path, found.how, found.why


def test_own_interpreter_with_a_framework_is_kept(own: Path, tmp_path: Path) -> None:
    other = make_venv(tmp_path / "other", "torch")
    found = choose(
        None,
        running=str(own),
        running_prefix=prefix(own),
        env={"VIRTUAL_ENV": prefix(other), "PATH": ""},
        timeout=10,
        running_frameworks=("torch",),
    )
    assert (found.path, found.how) == (str(own), "running")
    assert "which has torch" in found.why


def test_the_activated_venv_with_real_torch_is_found(own: Path, torch_cpu_python: Path) -> None:
    env = {"VIRTUAL_ENV": prefix(torch_cpu_python), "PATH": os.defpath}
    path, how, why = chosen(own, env)
    assert (path, how) == (str(torch_cpu_python), "found")
    assert f"the activated virtual environment (VIRTUAL_ENV={prefix(torch_cpu_python)}), which has torch" in why
    assert f"cuda-doctor's own interpreter ({own}) has no torch, TensorFlow or JAX" in why


def test_own_venv_activated_is_skipped_for_conda(own: Path, tmp_path: Path) -> None:
    conda = make_venv(tmp_path / "conda-env", "jax")
    path, how, why = chosen(own, {"VIRTUAL_ENV": prefix(own), "CONDA_PREFIX": prefix(conda), "PATH": str(own.parent)})
    assert (path, how) == (str(conda), "found")
    assert why.startswith(f"the activated conda environment (CONDA_PREFIX={prefix(conda)}), which has JAX")


def test_python3_on_path_outside_own_environment(own: Path, tmp_path: Path) -> None:
    plain = make_venv(tmp_path / "plain")
    trained = make_venv(tmp_path / "train", "tensorflow-cpu")
    # PATH as an activated own venv leaves it: own first, then a venv without, then one with a framework
    env = {"PATH": os.pathsep.join([str(own.parent), "relative/bin", str(plain.parent), str(trained.parent)])}
    path, how, why = chosen(own, env)
    assert (path, how) == (str(trained.parent / "python3"), "found")
    assert why.startswith("python3 on PATH, which has TensorFlow")


def test_each_environment_is_tried_once(own: Path, tmp_path: Path) -> None:
    trained = make_venv(tmp_path / "train", "torch")
    # its bin/python, python3 and the same folder twice on PATH are one environment
    env = {"VIRTUAL_ENV": prefix(trained), "PATH": os.pathsep.join([str(trained.parent), str(trained.parent)])}
    found = candidates(env, running=str(own), running_prefix=prefix(own))
    assert found == [(str(trained), f"the activated virtual environment (VIRTUAL_ENV={prefix(trained)})")]


def test_a_link_to_the_own_interpreter_is_its_own(tmp_path: Path) -> None:
    """cuda-doctor run by a system interpreter: /usr/bin/python3 and a link to it are its own."""
    install = tmp_path / "usr"
    (install / "bin").mkdir(parents=True)
    real = install / "bin" / "python3.12"
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    (install / "bin" / "python3").symlink_to(real)
    links = tmp_path / "links"
    links.mkdir()
    (links / "python").symlink_to(install / "bin" / "python3")
    env = {"PATH": os.pathsep.join([str(install / "bin"), str(links)])}
    assert candidates(env, running=str(real), running_prefix=str(install)) == []


def test_none_found_falls_back_and_says_where_it_looked(own: Path, tmp_path: Path) -> None:
    plain = make_venv(tmp_path / "plain")
    path, how, why = chosen(own, {"VIRTUAL_ENV": prefix(plain), "PATH": ""})
    assert (path, how) == (str(own), "fallback")
    assert f"the activated virtual environment (VIRTUAL_ENV={prefix(plain)}) ({plain})" in why
    assert why.endswith("--python PATH names the one you train with")
    _, _, nothing = chosen(own, {"PATH": ""})
    assert "no activated environment, and no python3 or python on PATH" in nothing


def test_a_candidate_that_hangs_is_given_up(own: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    stuck = folder / "python3"
    stuck.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 60\n")
    stuck.chmod(0o755)
    found = choose(None, running=str(own), running_prefix=prefix(own), env={"PATH": str(folder)}, timeout=0.5)
    assert found.how == "fallback"
    assert "did not answer in" in found.why


def test_no_code_of_the_current_directory_runs(own: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trained = make_venv(tmp_path / "train", "torch")
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "ran"
    for module in ("json", "os"):  # what the child imports first
        (project / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').write('{module}')\n")
    monkeypatch.chdir(project)
    said = probe(str(trained), {"PYTHONPATH": ".", "PATH": os.defpath}, timeout=10)
    assert said.frameworks == ("torch",), said
    assert not marker.exists()


def test_the_child_and_this_process_read_distributions_alike(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "all", "torch", "jax", "tf-nightly", "torchvision", "jaxlib")
    (site,) = (tmp_path / "all").glob("lib/python*/site-packages")
    (site / "torch_tensorrt-2.0.egg-info").mkdir()  # a name that starts like torch's is not torch
    assert installed_frameworks([str(site)]) == ("torch", "TensorFlow", "JAX")
    assert probe(str(python), {"PATH": os.defpath}, timeout=10).frameworks == ("torch", "TensorFlow", "JAX")


def test_given_python_is_validated(own: Path, tmp_path: Path) -> None:
    env = {"PATH": os.defpath}
    text = tmp_path / "passwd"
    text.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(UserError, match="not executable, so not a Python interpreter"):
        validate(str(text), env, 10)
    text.chmod(0o755)
    with pytest.raises(UserError, match="not a program"):
        validate(str(text), env, 10)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    with pytest.raises(UserError, match=r"not a Python interpreter \(it did not answer as Python does"):
        validate(str(script), env, 10)
    with pytest.raises(UserError, match="no such file"):
        validate(str(tmp_path / "missing"), env, 10)
    with pytest.raises(UserError, match="a directory"):
        validate(str(tmp_path), env, 10)
    validate(str(own), env, 10)  # a real interpreter without a framework is fine: the user asked for it
    assert chosen(own, {"PATH": ""}, given=str(own)) == (str(own), "given", "given with --python")


def test_a_given_name_is_the_one_the_path_finds(own: Path) -> None:
    env = {"PATH": str(own.parent)}
    assert chosen(own, env, given=own.name) == (str(own), "given", f"given with --python ({own.name} on PATH)")
    with pytest.raises(UserError, match=r"--python python3\.99: not found on PATH"):
        chosen(own, env, given="python3.99")


def test_the_choice_is_recorded() -> None:
    facts = Facts()
    record(facts, Interpreter("/envs/train/bin/python", "found", "the activated conda environment"))
    assert facts.get("framework.interpreter") == "/envs/train/bin/python"
    assert facts.get("framework.interpreter_how") == "found"
    assert facts.get("framework.interpreter_why") == "the activated conda environment"

"""Which Python interpreter's framework a check inspects.

``--python`` names one, which must really be a Python interpreter.  Without it, cuda-doctor's
own interpreter is inspected when torch, TensorFlow or JAX is installed in it.  Installed in an
environment of its own (the README's first command), it has none: then the one the user trains
with is looked for: the activated virtual environment (``VIRTUAL_ENV``), the activated conda
environment (``CONDA_PREFIX``), then ``python3`` and ``python`` on ``PATH``, each outside
cuda-doctor's own environment.  The first with a framework installed is chosen; whether it has
one is read from its installed distributions, in a bounded child that imports nothing from the
current directory (no framework is imported).  The choice and why are facts of the report.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_doctor.base.children import START_FLOOR, start_timeout, without_cwd_imports
from cuda_doctor.base.errors import UserError
from cuda_doctor.base.process import run_command
from cuda_doctor.core.facts import Facts

#: Distributions that mean "a framework is installed" → the framework's name in words.
FRAMEWORK_DISTRIBUTIONS = {
    "torch": "torch",
    "tensorflow": "TensorFlow",
    "tensorflow-cpu": "TensorFlow",
    "tensorflow-gpu": "TensorFlow",
    "tf-nightly": "TensorFlow",
    "jax": "JAX",
}
#: The same, as a metadata folder's name spells the project (``tensorflow_cpu-2.20.0.dist-info``).
_NORMALISED = {name.replace("-", "_"): words for name, words in FRAMEWORK_DISTRIBUTIONS.items()}
NO_FRAMEWORK = "no torch, TensorFlow or JAX"
#: Candidates looked at, at most: PATH can be long, and each costs an interpreter start.
MAX_CANDIDATES = 8
#: Seconds all candidates together may take (each gets ``start_timeout(timeout, …)`` of it).
SEARCH_BUDGET = 30.0
_MARK = "cuda-doctor-interpreter "
_OUTPUT_CAP = 64 << 10

#: Run by each candidate (Python 3 of any age, so no f-strings): its version, and which framework
#: distributions are installed on its path, read from the names of their metadata folders
#: (``torch-2.11.0.dist-info``) as importlib.metadata finds them, but without importing anything.
_PROBE_SOURCE = without_cwd_imports(
    """import json, os
wanted = WANTED
found = set()
for entry in sys.path:
    try:
        names = os.listdir(entry) if entry else []
    except OSError:  # a zip file or a folder that is gone: nothing installed there to list
        continue
    for name in names:
        stem, dot, kind = name.rpartition(".")
        if kind in ("dist-info", "egg-info") and dot:
            project = stem.split("-")[0].replace("-", "_").replace(".", "_").lower()
            if project in wanted:
                found.add(wanted[project])
print(MARK + json.dumps({"version": list(sys.version_info[:3]), "frameworks": sorted(found)}))
""".replace("WANTED", repr(_NORMALISED)).replace("MARK", repr(_MARK))
)


@dataclass(frozen=True)
class Interpreter:
    """The interpreter a check inspects, how it was chosen and why, in words."""

    path: str
    how: str  # "given" (--python), "running" (cuda-doctor's own), "found", "fallback" (none had a framework)
    why: str


@dataclass(frozen=True)
class Probed:
    """What one interpreter said of itself; ``problem`` when it could not say it."""

    version: tuple[int, ...] = ()
    frameworks: tuple[str, ...] = ()
    problem: str | None = None
    timed_out: bool = False


def choose(
    given: str | None,
    *,
    running: str,
    running_prefix: str,
    env: Mapping[str, str],
    timeout: float,
    running_frameworks: Sequence[str] | None = None,
) -> Interpreter:
    """The interpreter to inspect.  ``running`` and ``running_prefix`` are cuda-doctor's own
    (``sys.executable``, ``sys.prefix``); ``running_frameworks`` what it has installed, when the
    caller knows (``frameworks_here``), else it is asked like any candidate.  A ``given`` path
    that is not a Python interpreter is a ``UserError``."""
    if given is not None:
        path = on_path(given, env)
        validate(path, env, timeout)
        return Interpreter(path, "given", "given with --python" + (f" ({given} on PATH)" if path != given else ""))
    if running_frameworks is None:
        running_frameworks = probe(running, env, start_timeout(timeout, SEARCH_BUDGET)).frameworks
    if running_frameworks:
        return Interpreter(running, "running", f"cuda-doctor's own interpreter, which has {_words(running_frameworks)}")
    looked: list[str] = []
    deadline = time.monotonic() + SEARCH_BUDGET
    for path, where in candidates(env, running=running, running_prefix=running_prefix)[:MAX_CANDIDATES]:
        left = deadline - time.monotonic()
        if left <= 0:
            looked.append(f"{where} ({path}: not asked, the search's {SEARCH_BUDGET:g} s were spent)")
            break
        said = probe(path, env, min(start_timeout(timeout, SEARCH_BUDGET), left))
        if said.frameworks:
            own = f"cuda-doctor's own interpreter ({running}) has {_words(())}"
            why = f"{where}, which has {_words(said.frameworks)}; {own}"
            return Interpreter(path, "found", why)
        looked.append(f"{where} ({path}{': ' + said.problem if said.problem else ''})")
    searched = "; ".join(looked) if looked else "no activated environment, and no python3 or python on PATH"
    why = (
        f"cuda-doctor's own interpreter has {_words(())}, and no other one with a framework was found "
        f"(looked at: {searched}); --python PATH names the one you train with"
    )
    return Interpreter(running, "fallback", why)


def record(facts: Facts, chosen: Interpreter) -> None:
    """The choice as facts of the report (its JSON), which the checklist's header shows."""
    facts.set("framework.interpreter", chosen.path)
    facts.set("framework.interpreter_how", chosen.how)
    facts.set("framework.interpreter_why", chosen.why)


def candidates(env: Mapping[str, str], *, running: str, running_prefix: str) -> list[tuple[str, str]]:
    """(path, where it was found, in words), in the order they are tried; each environment once,
    none of them cuda-doctor's own."""
    found: list[tuple[str, str]] = []
    for variable, words in (
        ("VIRTUAL_ENV", "the activated virtual environment"),
        ("CONDA_PREFIX", "the activated conda environment"),
    ):
        prefix = env.get(variable)
        if prefix:
            path = _first_executable(Path(prefix) / "bin", ("python", "python3"))
            if path is not None:
                found.append((path, f"{words} ({variable}={prefix})"))
    for folder in env.get("PATH", "").split(os.pathsep):
        if not folder or not os.path.isabs(folder):  # "" and relative entries mean the current directory
            continue
        for name in ("python3", "python"):
            path = _first_executable(Path(folder), (name,))
            if path is not None:
                found.append((path, f"{name} on PATH"))
    own = {_environment(running), _environment_of_prefix(running_prefix)}
    seen: set[str] = set()
    chosen = []
    for path, where in found:
        identity = _environment(path)
        if identity in own or identity in seen or _environment_of_prefix(str(Path(path).parent.parent)) in own:
            continue
        seen.add(identity)
        chosen.append((path, where))
    return chosen


def probe(python: str, env: Mapping[str, str], timeout: float) -> Probed:
    """Ask ``python`` its version and which framework distributions it has (no framework import);
    it runs in the file system root, so that nothing of the current directory is on its path."""
    result = run_command([python, "-c", _PROBE_SOURCE], timeout=timeout, env=env, cwd=os.sep, cap=_OUTPUT_CAP)
    line = next((line for line in result.stdout.splitlines() if line.startswith(_MARK)), None)
    if line is None:  # its own output is not quoted: a program that is no Python may echo the script
        if result.timed_out or result.returncode is None:
            return Probed(problem=result.error or "it did not run", timed_out=result.timed_out)
        return Probed(problem=f"it did not answer as Python does; exit status {result.returncode}")
    try:
        said = json.loads(line[len(_MARK) :])
        version = tuple(int(part) for part in said["version"])
        named = {str(words) for words in said["frameworks"]}
        frameworks = tuple(words for words in dict.fromkeys(FRAMEWORK_DISTRIBUTIONS.values()) if words in named)
    except (ValueError, KeyError, TypeError):
        return Probed(problem=f"it answered something else: {line[:200]!r}")
    return Probed(version, frameworks)


def on_path(given: str, env: Mapping[str, str]) -> str:
    """``--python python3`` is the ``python3`` the environment's PATH finds, as a shell would run it;
    a name with a slash is a path as it is."""
    if os.sep in given:
        return given
    found = shutil.which(given, path=env.get("PATH", os.defpath))
    if found is None:
        raise UserError(f"--python {given}: not found on PATH")
    return found


def validate(path: str, env: Mapping[str, str], timeout: float) -> None:
    """``--python PATH`` must be a Python 3 interpreter that runs: a ``UserError`` saying why not.
    An interpreter that is only slow to start is not refused: the probes then say what it did."""
    file = Path(path)
    if not file.exists():
        raise UserError(f"--python {path}: no such file")
    if file.is_dir():
        raise UserError(f"--python {path}: a directory, not a Python interpreter (e.g. {file / 'bin' / 'python'})")
    if not os.access(file, os.X_OK):
        raise UserError(f"--python {path}: not executable, so not a Python interpreter")
    head = _head(file)
    if head is None:
        raise UserError(f"--python {path}: cannot be read")
    if not head.startswith((b"\x7fELF", b"#!")):
        raise UserError(f"--python {path}: not a program (neither an executable file nor a script)")
    said = probe(path, env, start_timeout(timeout, 60, START_FLOOR))
    if said.timed_out:
        return
    if not said.version:
        raise UserError(f"--python {path}: not a Python interpreter ({said.problem})")
    if said.version[0] < 3:
        version = ".".join(map(str, said.version))
        raise UserError(f"--python {path}: Python {version}; the framework checks need Python 3")


def frameworks_here() -> tuple[str, ...]:
    """The frameworks installed for this interpreter, found as a candidate's are (``_PROBE_SOURCE``);
    neither "" nor the current directory counts, as for a child."""
    here = os.getcwd()
    return installed_frameworks(entry for entry in sys.path if entry and os.path.abspath(entry) != here)


def installed_frameworks(paths: Iterable[str]) -> tuple[str, ...]:
    """The frameworks whose metadata folders (``torch-2.11.0.dist-info``) lie in ``paths``, in
    ``FRAMEWORK_DISTRIBUTIONS`` order: what ``_PROBE_SOURCE`` does inside a candidate."""
    found: set[str] = set()
    for entry in paths:
        try:
            names = os.listdir(entry)
        except OSError:  # a zip file, a missing folder
            continue
        for name in names:
            stem, dot, kind = name.rpartition(".")
            if dot and kind in ("dist-info", "egg-info"):
                project = stem.split("-")[0].replace("-", "_").replace(".", "_").lower()
                if project in _NORMALISED:
                    found.add(_NORMALISED[project])
    return tuple(words for words in dict.fromkeys(FRAMEWORK_DISTRIBUTIONS.values()) if words in found)


def _words(frameworks: Sequence[str]) -> str:
    return " and ".join(frameworks) if frameworks else NO_FRAMEWORK


def _first_executable(folder: Path, names: Sequence[str]) -> str | None:
    for name in names:
        path = folder / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def _environment(python: str) -> str:
    """Which environment an interpreter runs in: a virtual environment is the folder holding its
    ``pyvenv.cfg`` (its ``bin/python`` is only a link to the base interpreter); any other is the
    interpreter itself, links resolved (``/bin/python3`` and ``/usr/bin/python3.12`` are one)."""
    path = Path(os.path.abspath(python))
    if (path.parent.parent / "pyvenv.cfg").is_file():
        return os.path.realpath(path.parent.parent)
    return os.path.realpath(path)


def _environment_of_prefix(prefix: str) -> str:
    """A prefix's environment as ``_environment`` names it: a virtual environment is its folder."""
    return os.path.realpath(prefix) if (Path(prefix) / "pyvenv.cfg").is_file() else f"prefix:{os.path.realpath(prefix)}"


def _head(file: Path) -> bytes | None:
    try:
        with file.open("rb") as handle:
            return handle.read(4)
    except OSError:
        return None

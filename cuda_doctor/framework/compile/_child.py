"""Report, from inside the inspected interpreter, what Triton and Inductor would use when a compiled
step first runs: the C and C++ compilers, ``Python.h``, the folders of ``libcuda``, the ``ptxas``
and the cache folders, each found in the order their own code looks (standard library only; triton
is found, never imported).  Lookup orders, as read in their source:

- C compiler: triton ``python/triton/runtime/build.py`` ``_build`` (3.6; ``_find_compiler("c")``
  later): ``CC`` as set, else ``gcc`` on PATH, else ``clang``; it is run as one argv word.
- C++ compiler: torch ``_inductor/cpp_builder.py`` ``get_cpp_compiler`` with ``config.cpp.cxx``:
  ``CXX``, else ``g++``; ``cpp_compiler_search`` runs ``<cxx> --version``.
- ``Python.h``: ``_build`` includes ``sysconfig.get_paths(scheme)["include"]``, the default scheme
  with Debian's ``posix_local`` read as ``posix_prefix``.
- libcuda: ``third_party/nvidia/backend/driver.py`` ``libcuda_dirs``: ``TRITON_LIBCUDA_PATH``, else
  the folders ``/sbin/ldconfig -p`` gives for ``libcuda.so.1``, else the ``LD_LIBRARY_PATH``
  entries holding it; the launcher links the module's ``libraries`` (``cuda``: ``-lcuda`` needs
  ``libcuda.so``; ``libcuda.so.1`` from triton 3.6: ``-l:libcuda.so.1``).
- ptxas: ``knobs.nvidia.ptxas`` (``TRITON_PTXAS_PATH``, else the bundled ``backends/nvidia/bin``
  one; an unusable path falls back to it), and ``ptxas-blackwell`` for compute capability 10.0
  and newer where the knobs name it; under torch.compile ``_set_triton_ptxas_path``
  (``_inductor/runtime/compile_tasks.py``) first puts torch's ``bin/ptxas`` in TRITON_PTXAS_PATH.
- caches: ``knobs.cache.dir`` (``TRITON_CACHE_DIR``, else ``TRITON_HOME`` or ``~``, then
  ``.triton/cache``); ``_inductor/runtime/cache_dir_utils.py`` (``TORCHINDUCTOR_CACHE_DIR``, else
  ``<tempdir>/torchinductor_<user>``; torch.compile keeps Triton's kernels under it).

CONFIG (``sys.argv[1]``): ``timeout`` for each ``--version``, ``ldconfig`` (the program to run),
``libcuda_folders`` (where else to look for a folder to suggest).  Nothing here raises.
"""

from __future__ import annotations

import ast
import getpass
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import Any

from cuda_doctor.base.childside.report import attempt, describe, end, miss, new_report, open_records, put

#: ``ptxas --version`` → "release 12.8" (triton ``knobs.NvidiaTool.from_path``).
RELEASE = re.compile(r"release (\d+\.\d+)")
VERSION_LINE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
#: Inductor's user name in its default cache folder (``default_cache_dir``).
UNSAFE_USER = re.compile(r'[\\/:*?"<>|]')
OUTPUT_CHARS = 4000

COMPILER_FACTS = [
    "compile.cc", "compile.cc_source", "compile.cc_on_path", "compile.cc_works", "compile.cc_version",
    "compile.cc_error", "compile.cxx", "compile.cxx_source", "compile.cxx_path", "compile.cxx_works",
    "compile.cxx_version", "compile.cxx_error",
]  # fmt: skip
HEADER_FACTS = ["compile.python_include", "compile.python_h"]
TRITON_FACTS = ["compile.triton_version", "compile.triton_path", "compile.libcuda_libraries"]
LIBCUDA_FACTS = [
    "compile.libcuda_source", "compile.libcuda_dirs", "compile.libcuda_error", "compile.libcuda_so1_dirs",
    "compile.libcuda_so_dirs", "compile.libcuda_candidates",
]  # fmt: skip
PTXAS_FACTS = [
    "compile.ptxas_path", "compile.ptxas_version", "compile.ptxas_source", "compile.ptxas_error",
    "compile.ptxas_split", "compile.ptxas_blackwell_path", "compile.ptxas_blackwell_version",
    "compile.ptxas_blackwell_source", "compile.ptxas_blackwell_error",
]  # fmt: skip
TOOLKIT_FACTS = ["compile.toolkit_ptxas_path", "compile.toolkit_ptxas_version"]
CACHE_FACTS = [
    "compile.triton_cache.path", "compile.triton_cache.from", "compile.inductor_cache.path",
    "compile.inductor_cache.from", "compile.home", "compile.temp_dir", "compile.user",
]  # fmt: skip
#: Every fact of the report; each ends up known or unknown.
CHILD_FACTS = [
    "compile.python", "compile.python_version", "compile.triton_installed",
    *COMPILER_FACTS, *HEADER_FACTS, *TRITON_FACTS, *LIBCUDA_FACTS, *PTXAS_FACTS, *TOOLKIT_FACTS, *CACHE_FACTS,
]  # fmt: skip


def run_version(argv: list[str], timeout: float) -> tuple[bool, str, str | None]:
    """Whether ``argv`` exits 0 within ``timeout`` s, its output, and why not in words."""
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return False, "", f"{argv[0]} --version did not answer in {timeout:g} s"
    except (OSError, ValueError) as exc:  # not found, not executable, a NUL in the name
        return False, "", f"cannot run {argv[0]}: {describe(exc)}"
    text = done.stdout.decode("utf-8", "replace")[:OUTPUT_CHARS]
    if done.returncode != 0:
        last = [line.strip() for line in text.splitlines() if line.strip()][-1:]
        said = f": {last[0]}" if last else ""
        return False, text, f"{argv[0]} --version exited with status {done.returncode}{said}"
    return True, text, None


def first_line(text: str) -> str | None:
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


# -- compilers ----------------------------------------------------------------------------------------
def c_compiler() -> tuple[str | None, str | None, str | None]:
    """(the compiler Triton runs, where it came from, gcc or clang on PATH whatever CC says)."""
    on_path = shutil.which("gcc") or shutil.which("clang")
    if "CC" in os.environ:
        return os.environ["CC"], "CC", on_path
    return on_path, ("PATH" if on_path else None), on_path


def put_compilers(report: dict[str, dict[str, Any]], timeout: float) -> None:
    cc, source, on_path = c_compiler()
    put(report, "compile.cc", cc)
    put(report, "compile.cc_source", source)
    put(report, "compile.cc_on_path", on_path)
    if cc is None:
        put(report, "compile.cc_works", False)
        put(report, "compile.cc_version", None)
        put(report, "compile.cc_error", "CC is not set and neither gcc nor clang is on PATH")
    else:
        works, text, error = run_version([cc, "--version"], timeout)
        put(report, "compile.cc_works", works)
        put(report, "compile.cc_version", first_line(text) if works else None)
        put(report, "compile.cc_error", error)
    cxx = os.environ.get("CXX", "g++")
    put(report, "compile.cxx", cxx)
    put(report, "compile.cxx_source", "CXX" if "CXX" in os.environ else "default")
    put(report, "compile.cxx_path", cxx if os.sep in cxx else shutil.which(cxx))
    works, text, error = run_version([cxx, "--version"], timeout)
    put(report, "compile.cxx_works", works)
    put(report, "compile.cxx_version", first_line(text) if works else None)
    put(report, "compile.cxx_error", error)


def python_include() -> str:
    scheme = sysconfig.get_default_scheme() if hasattr(sysconfig, "get_default_scheme") else None
    if scheme == "posix_local":  # Debian's own scheme; Triton reads posix_prefix instead
        scheme = "posix_prefix"
    paths = sysconfig.get_paths(scheme=scheme) if scheme else sysconfig.get_paths()
    return str(paths["include"])


def put_headers(report: dict[str, dict[str, Any]]) -> None:
    include = python_include()
    put(report, "compile.python_include", include)
    put(report, "compile.python_h", os.path.isfile(os.path.join(include, "Python.h")))


# -- triton itself ------------------------------------------------------------------------------------
def triton_folder() -> str | None:
    spec = importlib.util.find_spec("triton")  # a top-level package: found, not run
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else os.path.dirname(str(spec.origin))


def read_text(path: str, limit: int = 1 << 20) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read(limit)


def triton_version(folder: str) -> str | None:
    """``__version__`` of the package found (what ``import triton`` gives), else its distribution's."""
    try:
        match = VERSION_LINE.search(read_text(os.path.join(folder, "__init__.py")))
    except OSError:
        match = None
    if match:
        return match.group(1)
    try:
        from importlib import metadata
    except ImportError:
        return None
    for name in ("triton", "pytorch-triton"):
        try:
            return str(metadata.version(name))
        except Exception:
            continue
    return None


def module_list(path: str, name: str) -> list[str] | None:
    """The strings of a module-level ``name = [...]`` in the file at ``path``, read, not run."""
    tree = ast.parse(read_text(path))
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, (ast.List, ast.Tuple)):
            continue
        if any(isinstance(target, ast.Name) and target.id == name for target in node.targets):
            items = [item.value for item in node.value.elts if isinstance(item, ast.Constant)]
            return [str(item) for item in items]
    return None


def put_triton(report: dict[str, dict[str, Any]], folder: str) -> None:
    put(report, "compile.triton_path", folder)
    put(report, "compile.triton_version", triton_version(folder))
    driver = os.path.join(folder, "backends", "nvidia", "driver.py")
    if not os.path.isfile(driver):
        miss(report, "compile.libcuda_libraries", f"this triton has no NVIDIA driver module ({driver})")
        return
    libraries = module_list(driver, "libraries")
    if libraries is None:
        miss(report, "compile.libcuda_libraries", f"no list of libraries in {driver}")
    else:
        put(report, "compile.libcuda_libraries", libraries)


# -- libcuda ------------------------------------------------------------------------------------------
def ldconfig_locations(ldconfig: str, timeout: float) -> tuple[list[str], str | None]:
    """The files ``ldconfig -p`` lists on lines naming ``libcuda.so.1``, and why none could be read."""
    try:
        done = subprocess.run([ldconfig, "-p"], stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], f"{ldconfig} -p did not answer in {timeout:g} s"
    except (OSError, ValueError) as exc:
        return [], f"cannot run {ldconfig} -p: {describe(exc)}"
    if done.returncode != 0:
        return [], f"{ldconfig} -p exited with status {done.returncode}"
    text = done.stdout.decode("utf-8", "replace")
    return [line.split()[-1] for line in text.splitlines() if "libcuda.so.1" in line and line.split()], None


def holding(folders: list[str], name: str) -> list[str]:
    return [folder for folder in folders if os.path.exists(os.path.join(folder, name))]


def put_libcuda(report: dict[str, dict[str, Any]], config: dict[str, Any], timeout: float) -> None:
    locations, error = ldconfig_locations(str(config.get("ldconfig") or "/sbin/ldconfig"), timeout)
    from_ldconfig = unique(os.path.dirname(location) for location in locations)
    from_ld_path = [folder for folder in os.environ.get("LD_LIBRARY_PATH", "").split(":") if folder]
    pinned = os.environ.get("TRITON_LIBCUDA_PATH")
    if pinned:
        dirs, source, error = [pinned], "TRITON_LIBCUDA_PATH", None
    elif error is not None:
        dirs, source = [], None  # triton's check_output raises: the lookup fails outright
    elif from_ldconfig:
        dirs, source = from_ldconfig, "ldconfig"
    else:
        dirs = holding(from_ld_path, "libcuda.so.1")
        source = "LD_LIBRARY_PATH" if dirs else None
    put(report, "compile.libcuda_source", source)
    put(report, "compile.libcuda_dirs", dirs)
    put(report, "compile.libcuda_error", error)
    put(report, "compile.libcuda_so1_dirs", holding(dirs, "libcuda.so.1"))
    put(report, "compile.libcuda_so_dirs", holding(dirs, "libcuda.so"))
    extra = [str(folder) for folder in config.get("libcuda_folders", [])]
    seen = unique([*from_ldconfig, *from_ld_path, *extra])
    # a stubs folder holds a libcuda.so that links but never runs: not a folder to suggest
    candidates = [folder for folder in holding(seen, "libcuda.so.1") if "stubs" not in folder.split(os.sep)]
    put(report, "compile.libcuda_candidates", candidates)


def unique(items: Any) -> list[str]:
    return list(dict.fromkeys(str(item) for item in items))


# -- ptxas --------------------------------------------------------------------------------------------
def tool_version(path: str, timeout: float) -> tuple[str | None, str | None]:
    works, text, error = run_version([path, "--version"], timeout)
    if not works:
        return None, error
    match = RELEASE.search(text)
    return (match.group(1), None) if match else (None, f"no 'release X.Y' in the output of {path} --version")


def nvidia_tool(candidates: list[tuple[str, str]], timeout: float) -> tuple[str | None, str | None, str | None, str]:
    """The first candidate that reports a release: (path, version, source, what failed before it)."""
    failed: list[str] = []
    for path, source in candidates:
        version, error = tool_version(path, timeout)
        if version is not None:
            return path, version, source, "; ".join(failed)
        failed.append(str(error))
    return None, None, None, "; ".join(failed)


def torch_ptxas() -> str | None:
    """torch's ``bin/ptxas`` when it is an executable file, as ``_set_triton_ptxas_path`` wants."""
    spec = importlib.util.find_spec("torch")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        return None
    path = os.path.join(locations[0], "bin", "ptxas")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def put_tool(report: dict[str, dict[str, Any]], key: str, candidates: list[tuple[str, str]], timeout: float) -> None:
    path, version, source, failed = nvidia_tool(candidates, timeout)
    put(report, f"compile.{key}_path", path)
    put(report, f"compile.{key}_version", version)
    put(report, f"compile.{key}_source", source)
    put(report, f"compile.{key}_error", failed or None)


def put_ptxas(report: dict[str, dict[str, Any]], folder: str, timeout: float) -> None:
    bundled = os.path.join(folder, "backends", "nvidia", "bin")
    candidates = [(os.path.join(bundled, "ptxas"), "triton")]
    if os.environ.get("TRITON_PTXAS_PATH") is not None:
        candidates.insert(0, (os.environ["TRITON_PTXAS_PATH"], "TRITON_PTXAS_PATH"))
    else:
        from_torch = torch_ptxas()
        if from_torch is not None:
            candidates.insert(0, (from_torch, "torch"))
    put_tool(report, "ptxas", candidates, timeout)
    try:
        split = "ptxas-blackwell" in read_text(os.path.join(folder, "knobs.py"))
    except OSError:
        split = False  # before the knobs module: one ptxas for every GPU
    put(report, "compile.ptxas_split", split)
    if not split:
        for name in ("path", "version", "source", "error"):
            put(report, f"compile.ptxas_blackwell_{name}", None)
        return
    candidates = [(os.path.join(bundled, "ptxas-blackwell"), "triton")]
    if os.environ.get("TRITON_PTXAS_BLACKWELL_PATH") is not None:
        candidates.insert(0, (os.environ["TRITON_PTXAS_BLACKWELL_PATH"], "TRITON_PTXAS_BLACKWELL_PATH"))
    put_tool(report, "ptxas_blackwell", candidates, timeout)


def put_toolkit_ptxas(report: dict[str, dict[str, Any]], timeout: float) -> None:
    """The CUDA toolkit's ptxas (PATH, CUDA_HOME, /usr/local/cuda): what a fix can point Triton at."""
    homes = [os.environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH")]
    candidates = [shutil.which("ptxas"), *[os.path.join(home, "bin", "ptxas") for home in homes if home]]
    candidates.append("/usr/local/cuda/bin/ptxas")
    path = next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
    put(report, "compile.toolkit_ptxas_path", path)
    put(report, "compile.toolkit_ptxas_version", tool_version(path, timeout)[0] if path else None)


# -- caches -------------------------------------------------------------------------------------------
def put_caches(report: dict[str, dict[str, Any]]) -> None:
    home = os.path.expanduser("~")
    put(report, "compile.home", home)
    if os.environ.get("TRITON_CACHE_DIR") is not None:
        put(report, "compile.triton_cache.path", os.environ["TRITON_CACHE_DIR"].strip())
        put(report, "compile.triton_cache.from", "TRITON_CACHE_DIR")
    else:
        base = os.environ.get("TRITON_HOME", "").strip() or os.path.expanduser("~/")
        put(report, "compile.triton_cache.path", os.path.join(base, ".triton", "cache"))
        put(report, "compile.triton_cache.from", "TRITON_HOME" if os.environ.get("TRITON_HOME") else "default")
    temp = tempfile.gettempdir()
    put(report, "compile.temp_dir", temp)
    try:
        user: str | None = getpass.getuser()
    except Exception as exc:  # no USER and no passwd entry: a container run under an arbitrary UID
        user = None
        miss(report, "compile.user", describe(exc))
    if user is not None:
        put(report, "compile.user", user)
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") is not None:
        put(report, "compile.inductor_cache.path", os.environ["TORCHINDUCTOR_CACHE_DIR"])
        put(report, "compile.inductor_cache.from", "TORCHINDUCTOR_CACHE_DIR")
    elif user is None:
        why = "torch.compile cannot name its cache folder: getpass.getuser() fails here"
        miss(report, "compile.inductor_cache.path", why)
        miss(report, "compile.inductor_cache.from", why)
    else:
        put(report, "compile.inductor_cache.path", os.path.join(temp, "torchinductor_" + UNSAFE_USER.sub("_", user)))
        put(report, "compile.inductor_cache.from", "default")


def collect(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    report = new_report()
    timeout = float(config.get("timeout", 10.0))
    put(report, "compile.python", sys.executable)
    put(report, "compile.python_version", platform.python_version())
    attempt(report, COMPILER_FACTS, lambda: put_compilers(report, timeout))
    attempt(report, HEADER_FACTS, lambda: put_headers(report))
    attempt(report, CACHE_FACTS, lambda: put_caches(report))
    attempt(report, TOOLKIT_FACTS, lambda: put_toolkit_ptxas(report, timeout))
    folder: list[str | None] = [None]

    def find() -> None:
        folder[0] = triton_folder()

    attempt(report, ["compile.triton_installed"], find)
    if "compile.triton_installed" in report["unknown"]:
        found = None
    else:
        found = folder[0]
        put(report, "compile.triton_installed", found is not None)
    if found is None:
        why = "triton is not installed in " + sys.executable
        for name in TRITON_FACTS + LIBCUDA_FACTS + PTXAS_FACTS:
            miss(report, name, report["unknown"].get("compile.triton_installed", why))
        return report
    attempt(report, TRITON_FACTS, lambda: put_triton(report, found))
    attempt(report, LIBCUDA_FACTS, lambda: put_libcuda(report, config, timeout))
    attempt(report, PTXAS_FACTS, lambda: put_ptxas(report, found, timeout))
    return report


def main() -> None:
    _records_fd, emit = open_records()
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    emit({"step": "find the compile toolchain"})
    emit(collect(config))
    end(0)


if __name__ == "__main__":
    main()

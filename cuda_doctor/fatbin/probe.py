"""The fatbin probe: device code and CUDA linkage of every shared object the target interpreter
can import, as ``fatbin.*`` facts.  No GPU is needed: a CPU-only machine gets the same facts.

The interpreter's ``sys.path`` comes from a short child of it (``_paths_child.py``, through
``cuda_doctor.children``); the folders on it, less the standard library's, are scanned in this
process (``scan``), within ``--timeout`` seconds, beside the framework probe's ``import torch``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_doctor import children
from cuda_doctor.facts import Facts
from cuda_doctor.fatbin.cache import ScanCache
from cuda_doctor.fatbin.scan import ScanResult, scan
from cuda_doctor.probes.base import ProbeContext

PATHS_CHILD = Path(__file__).with_name("_paths_child.py")
FATBIN_FACTS = (
    "fatbin.site_dirs",
    "fatbin.files_scanned",
    "fatbin.files_read",
    "fatbin.files",
    "fatbin.complete",
    "fatbin.incomplete_reason",
    "fatbin.seconds",
    "fatbin.problems",
    "fatbin.cache_error",
)
#: The scan's own budget is ``--timeout``, at least this (a cold first scan reads every header).
MIN_BUDGET = 2.0


@dataclass
class FatbinProbe:
    name: str = "fatbin"
    cache_path: Path | None = None  # None: cuda-doctor's cache folder

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast  # --fast reads nothing but NVML, the environment and containers

    def budget(self, ctx: ProbeContext) -> float:
        return max(ctx.timeout, MIN_BUDGET)

    def deadline(self, ctx: ProbeContext) -> float:
        return ctx.timeout + self.budget(ctx) + 10  # the paths child, the scan, writing the cache

    def collect(self, ctx: ProbeContext) -> Facts:
        roots, why = site_dirs(ctx)
        if roots is None:
            return all_unknown(why)
        cache = ScanCache.load(self.cache_path)
        result = scan(roots, cache, self.budget(ctx))
        cache.save()
        return shape(roots, result, cache.error)


def site_dirs(ctx: ProbeContext) -> tuple[list[str] | None, str]:
    """The folders of the interpreter's ``sys.path`` that can hold packages, in order: not the
    standard library, not the current folder, each once.  A folder inside another one (a venv
    inside a project on PYTHONPATH) is its own root: the walk of the outer one skips it."""
    try:
        source = PATHS_CHILD.read_text(encoding="utf-8")
    except OSError as exc:
        return None, f"cannot read {PATHS_CHILD}: {exc.strerror or exc}"
    result = children.run(ctx.python, source, env=ctx.env, timeout=ctx.timeout, start_timeout=ctx.timeout)
    answer = next((r for r in children.parse_records(result.stdout) if "sys_path" in r), None)
    if answer is None:
        if result.returncode is None:
            return None, f"could not run {ctx.python}: {result.error}"
        if result.timed_out:
            return None, f"{ctx.python} did not print its sys.path in {ctx.timeout:g} s"
        return None, f"{ctx.python} did not print its sys.path (exit status {result.returncode})"
    stdlib = [os.path.realpath(p) for p in answer.get("stdlib") or [] if isinstance(p, str)]
    roots: list[str] = []
    for entry in answer.get("sys_path") or []:
        if not isinstance(entry, str) or entry in ("", ".") or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        inside_stdlib = any(real == s or real.startswith(s + os.sep) for s in stdlib)
        if inside_stdlib and not real.endswith(("site-packages", "dist-packages")):
            continue
        if real not in roots:
            roots.append(real)
    return roots, ""


def shape(roots: list[str], result: ScanResult, cache_error: str | None) -> Facts:
    facts = Facts()
    facts.set("fatbin.site_dirs", roots)
    facts.set("fatbin.files_scanned", result.scanned)
    facts.set("fatbin.files_read", result.read)
    facts.set("fatbin.files", [_file(item) for item in result.files])
    facts.set("fatbin.complete", result.complete)
    facts.set("fatbin.incomplete_reason", result.reason)
    facts.set("fatbin.seconds", result.seconds)
    facts.set("fatbin.problems", result.problems)
    facts.set("fatbin.cache_error", cache_error)
    return facts


def _file(item: dict[str, Any]) -> dict[str, Any]:
    owner = item.get("owner") or [None, None]
    return {
        "path": item["path"],
        "distribution": owner[0],
        "distribution_version": owner[1],
        "sass": item.get("sass", []),
        "sass_specific": item.get("sass_specific", []),
        "ptx": item.get("ptx", []),
        "cudart": item.get("cudart"),
        "c10_cuda": bool(item.get("c10_cuda")),
        "torch": bool(item.get("torch")),
        "complete": bool(item.get("complete", True)),
    }


def all_unknown(reason: str) -> Facts:
    facts = Facts()
    for name in FATBIN_FACTS:
        facts.mark_unknown(name, reason)
    return facts


PROBE = FatbinProbe()

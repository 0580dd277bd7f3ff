"""The ``fatbin.*`` facts: device code and CUDA linkage of every shared object the target
interpreter can import, scanned within ``--timeout`` seconds (at least ``MIN_BUDGET``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cuda_doctor.core.facts import Facts
from cuda_doctor.framework.fatbin.cache import ScanCache
from cuda_doctor.framework.fatbin.scan import ScanResult, scan

FATBIN_FACTS = (
    "fatbin.site_dirs", "fatbin.files_scanned", "fatbin.files_read", "fatbin.files", "fatbin.complete",
    "fatbin.incomplete_reason", "fatbin.seconds", "fatbin.problems", "fatbin.cache_error",
)  # fmt: skip
#: The scan's own budget is ``--timeout``, at least this (a cold first scan reads every header).
MIN_BUDGET = 2.0


def budget(timeout: float) -> float:
    return max(timeout, MIN_BUDGET)


def site_dirs(paths: dict[str, Any]) -> list[str]:
    """The folders of ``sys.path`` that can hold packages, in order, each once (no stdlib, not ".")."""
    stdlib = [os.path.realpath(p) for p in paths.get("stdlib") or [] if isinstance(p, str)]
    roots: list[str] = []
    for entry in paths.get("sys_path") or []:
        if not isinstance(entry, str) or entry in ("", ".") or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        inside_stdlib = any(real == s or real.startswith(s + os.sep) for s in stdlib)
        if inside_stdlib and not real.endswith(("site-packages", "dist-packages")):
            continue
        if real not in roots:
            roots.append(real)
    return roots


def scan_facts(paths: dict[str, Any], seconds: float, cache_path: Path | None = None) -> Facts:
    roots = site_dirs(paths)
    cache = ScanCache.load(cache_path)
    result = scan(roots, cache, seconds)
    cache.save()
    return shape(roots, result, cache.error)


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
    facts.mark_all_unknown(FATBIN_FACTS, reason)
    return facts

"""Cost of the fatbin scan over an interpreter's site-packages: cold (no cache) and warm (cached).

The scan runs beside the framework probe's `import torch` in `check`, so what counts is that it
ends before that import does; this script measures it alone.  "cold" starts from an empty
cache file (the files may still be in the page cache: the second and later cold runs measure
header reading, not the disk); "warm" reuses the cache, so it lists the folders and compares
stamps only.

Usage: python benchmarks/fatbin_scan.py [--python PATH] [--runs 5] [--budget 60] [--top 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cuda_doctor.framework.fatbin.cache import ScanCache  # noqa: E402  (the repository's own package)
from cuda_doctor.framework.fatbin.collect import site_dirs  # noqa: E402
from cuda_doctor.framework.fatbin.scan import read_file, scan, shared_objects  # noqa: E402

PATHS = (
    "import json, sys, sysconfig; p = sysconfig.get_paths(); "
    "print(json.dumps({'sys_path': sys.path, 'stdlib': [p['stdlib'], p['platstdlib']]}))"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose sys.path is scanned")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=float, default=60.0, help="the scan's time budget (check uses --timeout)")
    parser.add_argument("--top", type=int, default=10, help="the slowest files to list")
    args = parser.parse_args()
    # the folders check scans: the interpreter's sys.path as its framework-probe child reports it
    answer = subprocess.run([args.python, "-c", PATHS], capture_output=True, text=True, timeout=60, check=True)
    roots = site_dirs(json.loads(answer.stdout))
    print(f"python {args.python}; folders scanned: {', '.join(roots)}")
    start = time.perf_counter()
    listed, _ = shared_objects(roots, time.monotonic() + args.budget)
    print(f"shared objects: {len(listed)} (listing alone {time.perf_counter() - start:.3f} s)")
    with tempfile.TemporaryDirectory() as folder:
        cold, warm = [], []
        result = None
        for _ in range(args.runs):
            path = Path(folder) / "fatbin.json"
            path.unlink(missing_ok=True)
            cache = ScanCache.load(path)
            started = time.perf_counter()
            result = scan(roots, cache, args.budget)
            cache.save()
            cold.append(time.perf_counter() - started)
            started = time.perf_counter()
            again = scan(roots, ScanCache.load(path), args.budget)
            warm.append(time.perf_counter() - started)
            assert again.read == 0, "a warm scan read files again"
        assert result is not None
        written = Path(folder) / "fatbin.json"
        size = written.stat().st_size if written.exists() else 0  # nothing to cache: no shared objects
    code = [f for f in result.files if f.get("sass") or f.get("sass_specific") or f.get("ptx")]
    linked = len(result.files) - len(code)
    print(f"with device code: {len(code)}; linked to the CUDA runtime or libc10_cuda only: {linked}")
    print(f"complete: {result.complete}{'' if result.complete else ' (' + str(result.reason) + ')'}")
    first, median = cold[0], statistics.median(cold)
    print(f"cold: median {median:.3f} s, first {first:.3f} s, max {max(cold):.3f} s ({args.runs} runs)")
    print(f"warm: median {statistics.median(warm):.3f} s, max {max(warm):.3f} s; cache file {size / 1024:.0f} KiB")
    timed = []
    for item in code:
        stat = os.stat(item["path"])
        started = time.perf_counter()
        read_file(item["path"], [stat.st_size, stat.st_mtime_ns, stat.st_ino])
        timed.append((time.perf_counter() - started, item["path"], stat.st_size))
    for seconds, path, size_bytes in sorted(timed, reverse=True)[: args.top]:
        print(f"  {seconds * 1000:8.1f} ms  {size_bytes / 2**20:8.1f} MiB  {path}")


if __name__ == "__main__":
    main()

"""Work spread over forked worker processes (Linux only), for reading thousands of report files;
each worker ends silently on Ctrl-C, and the kernel kills it when cuda-doctor ends."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Chunks per worker: enough that one slow chunk does not leave the other workers idle.
CHUNKS_PER_JOB = 4
#: Most workers ``default_jobs`` picks: past that, reading the files from disk is the limit.
MAX_JOBS = 8
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, as ``taskset`` or a cgroup cpuset sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def default_jobs(items: int, per_job: int) -> int:
    """One worker per usable CPU (at most ``MAX_JOBS``), and none beyond one per ``per_job`` items."""
    return max(1, min(usable_cpus(), MAX_JOBS, items // per_job))


def available() -> bool:
    import multiprocessing

    return sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()


def map_chunks(func: Callable[[Sequence[T]], list[R]], items: Sequence[T], jobs: int) -> list[R] | None:
    """``func`` (picklable) over consecutive chunks of ``items`` in ``jobs`` worker processes, the
    results joined in order; None when workers cannot be had here (the caller then does the work)."""
    if jobs < 2 or len(items) < 2 or not available():
        return None
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    jobs = min(jobs, len(items))
    count = min(len(items), jobs * CHUNKS_PER_JOB)
    bounds = [len(items) * k // count for k in range(count + 1)]
    chunks = [items[start:end] for start, end in itertools.pairwise(bounds)]
    for stream in (sys.stdout, sys.stderr):  # a forked worker must not write our buffered output again
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    try:
        with ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_start_worker,
            initargs=(os.getpid(),),
        ) as pool:
            parts = list(pool.map(func, chunks))
    except (OSError, NotImplementedError, BrokenProcessPool):
        return None  # no workers to be had, or one died (killed for memory): done in-process instead
    return [result for part in parts for result in part]


def _start_worker(parent: int) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)  # the parent's wakeup pipe is the parent's
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent ended before the request above was made
        os._exit(1)

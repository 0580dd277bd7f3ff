"""One read of the NVML facts on a daemon thread, abandoned after ``ctx.timeout``: NVML can
hang on a wedged driver."""

from __future__ import annotations

import threading
import time
from typing import Any

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml import binding
from cuda_doctor.gpu.nvml.gpu_facts import nvml_failure, read_facts


def collect_nvml(ctx: ProbeContext, nvml: Any = None) -> Facts:
    """Ask NVML about the driver and every GPU within ``ctx.timeout`` s; ``nvml`` replaces ``pynvml``."""
    return NvmlRead(ctx, nvml, binding.library_missing() if nvml is None else None).start().facts(ctx.timeout)


class NvmlRead:
    """One conversation with NVML on a daemon thread: init, every reading, then shutdown, which
    nobody waits for (the facts are handed over before it)."""

    def __init__(self, ctx: ProbeContext, nvml: Any = None, missing: binding.NvmlUnavailable | None = None) -> None:
        self.ctx = ctx
        self.nvml = nvml
        self.missing = missing  # the loader finds no NVML library, as the caller asked (binding.library_missing)
        self.ready = threading.Event()  # the facts (or the error) are there
        self.closed = threading.Event()  # the thread has finished, NVML shut down if it was opened
        self._facts: Facts | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cuda-doctor-nvml", daemon=True)

    def start(self) -> NvmlRead:
        with _open_lock:
            _open_reads.add(self)
        self._thread.start()
        return self

    def facts(self, timeout: float) -> Facts:
        if not self.ready.wait(timeout):
            return nvml_failure("not_answering", f"NVML did not answer in {timeout:g} s")
        if self._error is not None:
            raise self._error  # not an Exception (those are recorded as facts)
        assert self._facts is not None
        return self._facts

    def _run(self) -> None:
        opened = None
        try:
            if self.missing is not None:
                raise self.missing
            nvml = binding.load() if self.nvml is None else self.nvml
            binding.init(nvml)
            opened = nvml
            self._facts = read_facts(self.ctx, nvml)
        except binding.NvmlUnavailable as exc:
            self._facts = nvml_failure(exc.status, str(exc))
        except Exception as exc:  # a binding bug must still end as a recorded reason
            self._facts = nvml_failure("error", f"NVML query failed: {type(exc).__name__}: {exc}")
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            self._error = exc
        self.ready.set()
        try:
            error = None if opened is None else binding.shutdown(opened)
            if error is not None:
                shutdown_errors.append(error)
        finally:
            with _open_lock:
                _open_reads.discard(self)
            self.closed.set()


#: Reads whose conversation with NVML has not ended yet.
_open_reads: set[NvmlRead] = set()
_open_lock = threading.Lock()

#: Why nvmlShutdown failed in this process, if it did (too late to become a fact; for debugging).
shutdown_errors: list[str] = []


def wait_closed(timeout: float) -> bool:
    """Wait up to ``timeout`` s until every NVML read has shut NVML down (before ``exec``); False if not."""
    deadline = time.monotonic() + timeout
    with _open_lock:
        reads = list(_open_reads)
    return all(read.closed.wait(max(0.0, deadline - time.monotonic())) for read in reads)

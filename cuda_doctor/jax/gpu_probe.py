"""Phase 2: the backend JAX chose, and the JAX smoke step measured, in the JAX child that phase 1
left (else in a child of its own), alone and before the torch smoke run."""

from __future__ import annotations

from dataclasses import dataclass

from cuda_doctor.base import children
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.jax._child import BACKEND_FACTS
from cuda_doctor.jax.probe import (
    DEFAULT_MIN_TIMEOUT,
    JAX_CHILD,
    child_timeout,
    first_report,
    is_backend,
    serving,
    shape,
    wait_backend,
    why_no_answer,
)
from cuda_doctor.jax.smoke_step import smoke
from cuda_doctor.smoke.runner import END_GRACE


@dataclass
class JaxGpuProbe:
    name: str = "jax_gpu"
    min_timeout: float = DEFAULT_MIN_TIMEOUT

    def applies(self, ctx: ProbeContext) -> bool:
        return not ctx.fast

    def deadline(self, ctx: ProbeContext) -> float:
        # a child of its own (import jax), the backend, the smoke step; then kills and reads
        return 2 * child_timeout(ctx, self.min_timeout) + ctx.smoke_timeout + 30

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        child = ctx.handoff.take(JAX_CHILD)
        if child is None:  # no phase 1 before this one: the child's report comes first
            child, facts = self._own_child(ctx)
            if child is None:
                return facts
        elif child.result is not None and child.seen(is_backend) is None:
            return facts  # it ended in phase 1 before its backend was up, which said why
        try:
            if self._backend(ctx, child, facts) and ctx.smoke:
                facts.merge(smoke(ctx, child, facts))
        finally:
            # told by its closed stdin; its context torn down while the next probe runs
            ctx.handoff.let_end(child, END_GRACE)
        return facts

    def _own_child(self, ctx: ProbeContext) -> tuple[children.Child | None, Facts]:
        child, facts = first_report(ctx, wait=True, timeout=child_timeout(ctx, self.min_timeout), what="jax_gpu")
        if child is not None and serving(child, facts):
            return child, facts
        if child is not None:
            child.stop(grace=1.0)
        return None, facts  # the child's report said why there is no backend (BACKEND_FACTS unknown)

    def _backend(self, ctx: ProbeContext, child: children.Child, facts: Facts) -> bool:
        """The backend's facts, from the record the child prints after its report; True when it printed one."""
        limit = child_timeout(ctx, self.min_timeout)
        record = child.seen(is_backend) or wait_backend(child, limit)
        if record is None:
            facts.mark_all_unknown(BACKEND_FACTS, why_no_answer(child.stop(), limit))
            return False
        facts.merge(shape(record["backend"], ctx.python, tuple(BACKEND_FACTS)))
        return True


PROBE = JaxGpuProbe()

"""What reading the kernel log and listening for Xid events cost, and what they found here.

Prints, for the kernel log probe (which `check --fast` runs) and the kernel module probe, the
median time of one collect in this process, the source read and the Xids found; and for NVML's
Xid events, the time to start and stop listening and the events seen meanwhile.

Usage: python benchmarks/node_health_cost.py [--runs 21]
"""

from __future__ import annotations

import argparse
import statistics
import time

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvml.events import XidEvents
from cuda_doctor.host.kernel_log import PROBE as KERNEL_LOG
from cuda_doctor.host.kernel_module import PROBE as KERNEL_MODULE


def timed_collect(probe: object, ctx: ProbeContext, runs: int) -> tuple[float, object]:
    times = []
    facts = None
    for _ in range(runs):
        start = time.perf_counter()
        facts = probe.collect(ctx)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
    return statistics.median(times), facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    ctx = ProbeContext()
    seconds, facts = timed_collect(KERNEL_LOG, ctx, args.runs)
    print(f"kernel log probe: median {seconds * 1000:.2f} ms over {args.runs} runs")
    print(f"  values: { {k: v for k, v in facts.values.items() if k != 'kernel_log.xids'} }")  # type: ignore[attr-defined]
    print(f"  xids: {facts.get('kernel_log.xids')}  unknown: {facts.unknown}")  # type: ignore[attr-defined]
    seconds, facts = timed_collect(KERNEL_MODULE, ctx, args.runs)
    print(f"kernel module probe: median {seconds * 1000:.2f} ms; {facts.values} {facts.unknown}")  # type: ignore[attr-defined]
    start = time.perf_counter()
    listening = XidEvents().start()
    started = time.perf_counter() - start
    time.sleep(1.0)
    start = time.perf_counter()
    events, why = listening.stop()
    stopped = time.perf_counter() - start
    print(f"NVML Xid events: start {started * 1000:.1f} ms, stop {stopped * 1000:.1f} ms; events {events}; {why}")


if __name__ == "__main__":
    main()

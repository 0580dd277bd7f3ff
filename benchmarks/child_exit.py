"""How long a torch or JAX process takes to end once it has said its last word, on a GPU machine.

A check waits for each child of the target interpreter to end, so this time is part of a full
check's.  For each framework, after GPU work like the smoke run's (device memory, pinned host
memory, a matmul, a convolution for torch), the time from the child's last line to its reaping:
with the interpreter's teardown (``sys.exit``) and without it (``os._exit``, as cuda-doctor's
children end).  Medians of N runs, in seconds.

Usage: python benchmarks/child_exit.py [--runs 5] [--python PY]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

TORCH = """
import os, sys, torch
a = torch.randn(4096, 4096, device="cuda"); block = torch.empty(64 << 20, device="cuda"); block.fill_(1.0)
host = torch.empty(64 << 20, pin_memory=True); host.copy_(block)
(a @ a).sum().item()
torch.nn.Conv2d(3, 16, 3, padding=1).cuda()(torch.randn(8, 3, 64, 64, device="cuda")).sum().item()
print("done", flush=True)
"""
JAX = """
import os, sys, jax, jax.numpy as jnp
x = jnp.ones((4096, 4096), jnp.bfloat16)
(x @ x).block_until_ready()
print("done", flush=True)
"""
ENDINGS = {"teardown": "sys.exit(0)", "os._exit": "sys.stderr.flush(); os._exit(0)"}


def exit_seconds(python: str, source: str) -> float | None:
    proc = subprocess.Popen([python, "-c", source], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "done":
        proc.wait()
        return None
    said = time.perf_counter()
    proc.wait()
    return time.perf_counter() - said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default="python3")
    args = parser.parse_args()
    for framework, body in (("torch", TORCH), ("jax", JAX)):
        for ending, code in ENDINGS.items():
            times = [exit_seconds(args.python, body + code + "\n") for _ in range(args.runs)]
            measured = [t for t in times if t is not None]
            if not measured:
                print(f"{framework:<6} {ending:<9} did not run (no GPU, or the framework is missing)")
                continue
            print(
                f"{framework:<6} {ending:<9} ends {statistics.median(measured):.3f} s after its last line "
                f"(min {min(measured):.3f}, max {max(measured):.3f}, {len(measured)} runs)"
            )


if __name__ == "__main__":
    main()

"""One rank of the all-reduce smoke, run by the target interpreter (standard library and torch
only) with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.  Bus bandwidth follows nccl-tests:
busbw = algbw * 2(n-1)/n for all-reduce.  Its records on stdout:

    {"started": true, ...}      before torch is imported
    {"event": "joining", ...}   torch imported, entering init_process_group
    {"event": "joined", ...}    once init_process_group has returned
    {"event": "result", ...}    the one result line of this rank (or {"event": "error", ...})
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

#: Test-only switch: the rank named here never joins the group (exercises the timeout path).
STALL_ENV = "CUDA_DOCTOR_NCCL_TEST_STALL_RANK"


def emit(event: str, **payload: Any) -> None:
    print(json.dumps({"event": event, **payload}), flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--sizes", default="1048576,16777216,268435456", help="message sizes in bytes, comma-separated")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--init-timeout", type=float, default=60.0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    print(json.dumps({"started": True, "rank": rank, "pid": os.getpid()}), flush=True)
    if os.environ.get(STALL_ENV) == str(rank):
        while True:  # never joins; the launcher's hard timeout must kill us
            time.sleep(3600)
    try:
        return run_rank(args, rank, world)
    except Exception as exc:  # reported as data: the launcher turns it into the verdict
        emit("error", rank=rank, error=f"{type(exc).__name__}: {exc}".strip())
        return 1


def run_rank(args: argparse.Namespace, rank: int, world: int) -> int:
    start = time.perf_counter()
    import datetime

    import torch
    import torch.distributed as dist

    import_seconds = time.perf_counter() - start
    on_gpu = args.backend == "nccl"
    device = torch.device("cuda", rank) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(rank)

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize(device)

    emit("joining", rank=rank, import_seconds=import_seconds)
    timeout = datetime.timedelta(seconds=args.init_timeout)
    t0 = time.perf_counter()
    dist.init_process_group(backend=args.backend, init_method="env://", rank=rank, world_size=world, timeout=timeout)
    init_seconds = time.perf_counter() - t0
    emit("joined", rank=rank, init_seconds=init_seconds)

    # Correctness: every element's expected sum is known exactly (small integers in fp32).
    n = 65536
    probe = torch.arange(n, dtype=torch.float32, device=device) + float(rank)
    dist.all_reduce(probe)
    expected = torch.arange(n, dtype=torch.float32, device=device) * world + world * (world - 1) / 2
    sum_ok = bool(torch.equal(probe, expected))

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    # A fixed rank-local workload, timed without communication, so a slow GPU stands out
    # (all-reduce timings are coupled: every rank waits for the slowest).
    a = torch.ones(max(sizes) // 4, dtype=torch.float32, device=device)
    b = torch.ones_like(a)
    a.add_(b)
    sync()
    t0 = time.perf_counter()
    for _ in range(10):
        a.add_(b)
    sync()
    local_seconds = time.perf_counter() - t0
    del a, b

    per_size: dict[str, dict[str, float]] = {}
    allreduce_seconds = 0.0
    for size in sizes:
        buf = torch.ones(max(size // 4, 1), dtype=torch.float32, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        sync()
        elapsed = time.perf_counter() - t0
        allreduce_seconds += elapsed
        per_op = elapsed / args.iters
        nbytes = buf.numel() * buf.element_size()
        algbw = nbytes / per_op / 1e9
        busbw = algbw * 2 * (world - 1) / world
        per_size[str(nbytes)] = {"seconds_per_op": per_op, "algbw_gbps": algbw, "busbw_gbps": busbw}
        del buf

    result: dict[str, Any] = {
        "rank": rank,
        "world_size": world,
        "backend": args.backend,
        "device": str(device),
        "torch_version": torch.__version__,
        "sum_ok": sum_ok,
        "import_seconds": import_seconds,
        "init_seconds": init_seconds,
        "local_seconds": local_seconds,
        "allreduce_seconds": allreduce_seconds,
        "sizes": per_size,
    }
    if on_gpu:
        result["device_name"] = torch.cuda.get_device_name(device)
        result["device_capability"] = "{}.{}".format(*torch.cuda.get_device_capability(device))
        if rank == 0:
            result.update(gpu_topology(torch))
    dist.barrier()
    dist.destroy_process_group()
    emit("result", **result)
    return 0


def gpu_topology(torch: Any) -> dict[str, Any]:
    """Peer access between every pair of visible GPUs, and the NCCL torch was built with."""
    count = torch.cuda.device_count()
    peer = torch.cuda.can_device_access_peer
    p2p = {f"{i}-{j}": bool(peer(i, j) and peer(j, i)) for i in range(count) for j in range(i + 1, count)}
    out: dict[str, Any] = {"p2p": p2p, "device_count": count, "nccl_version": None}
    try:
        raw = torch.cuda.nccl.version()
        out["nccl_version"] = ".".join(str(p) for p in raw) if isinstance(raw, tuple) else str(raw)
    except Exception as exc:  # recorded, never fatal: the all-reduce result still stands
        out["nccl_version_error"] = f"{type(exc).__name__}: {exc}"
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

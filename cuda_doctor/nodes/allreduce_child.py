"""One rank of the all-reduce across nodes, run by the target interpreter (standard library and
torch only) with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_RANK set.  Bus bandwidth
follows nccl-tests: busbw = algbw * 2(n-1)/n for all-reduce.  Its records on stdout:

    {"started": true}            before torch is imported
    {"event": "versions", ...}   torch imported: its version, CUDA build, NCCL, GPUs
    {"event": "joined", ...}     init_process_group has returned
    {"event": "result", ...}     the sum checked and the figures (or {"event": "error", ...})
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def emit(event: str, **payload: Any) -> None:
    print(json.dumps({"event": event, **payload}), flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="gloo", choices=["nccl", "gloo"])
    parser.add_argument("--size", type=int, default=1 << 24, help="message size in bytes")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--init-timeout", type=float, default=60.0)
    parser.add_argument("--versions-only", action="store_true")
    args = parser.parse_args(argv)
    print(json.dumps({"started": True, "pid": os.getpid()}), flush=True)
    try:
        import torch
    except Exception as exc:  # no torch in this interpreter: the answer, not a crash
        emit("versions", torch_installed=False, import_error=f"{type(exc).__name__}: {exc}".strip())
        return 0 if args.versions_only else 1
    emit("versions", **versions(torch))
    if args.versions_only:
        return 0
    try:
        return run_rank(torch, args)
    except Exception as exc:  # reported as data: the caller turns it into the verdict
        emit("error", error=f"{type(exc).__name__}: {exc}".strip()[:2000])
        return 1


def versions(torch: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"torch_installed": True, "torch_version": str(torch.__version__)}
    out["cuda_build"] = getattr(torch.version, "cuda", None)
    out["nccl_version"] = None
    try:
        raw = torch.cuda.nccl.version()
        out["nccl_version"] = ".".join(str(p) for p in raw) if isinstance(raw, tuple) else str(raw)
    except Exception as exc:  # a CPU build has no NCCL
        out["nccl_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["device_count"] = int(torch.cuda.device_count()) if out["cuda_available"] else 0
    except Exception as exc:
        out["cuda_available"] = False
        out["device_count"] = 0
        out["cuda_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        import torch.distributed as dist

        out["distributed"] = bool(dist.is_available())
        out["gloo"] = bool(dist.is_available() and dist.is_gloo_available())
        out["nccl"] = bool(dist.is_available() and dist.is_nccl_available())
    except Exception as exc:
        out["distributed"] = False
        out["distributed_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def run_rank(torch: Any, args: argparse.Namespace) -> int:
    import datetime

    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    on_gpu = args.backend == "nccl"
    if on_gpu:
        if not torch.cuda.is_available():  # before torch's own, less telling, error
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise RuntimeError(f"NCCL needs a GPU, and torch {torch.__version__} ({build}) sees none here")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize(device)

    t0 = time.perf_counter()
    timeout = datetime.timedelta(seconds=args.init_timeout)
    dist.init_process_group(backend=args.backend, init_method="env://", rank=rank, world_size=world, timeout=timeout)
    emit("joined", rank=rank, init_seconds=time.perf_counter() - t0)

    # Correctness: every element's expected sum is known exactly (small integers in fp32).
    n = 65536
    probe = torch.arange(n, dtype=torch.float32, device=device) + float(rank)
    dist.all_reduce(probe)
    expected = torch.arange(n, dtype=torch.float32, device=device) * world + world * (world - 1) / 2
    sum_ok = bool(torch.equal(probe, expected))

    buf = torch.ones(max(args.size // 4, 1), dtype=torch.float32, device=device)
    dist.all_reduce(buf)  # warm-up: connections and buffers set up outside the timing
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(buf)
    sync()
    per_op = (time.perf_counter() - t0) / args.iters
    nbytes = buf.numel() * buf.element_size()
    algbw = nbytes / per_op / 1e9
    result = {
        "rank": rank,
        "world_size": world,
        "backend": args.backend,
        "device": str(device),
        "sum_ok": sum_ok,
        "bytes": nbytes,
        "seconds_per_op": per_op,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * 2 * (world - 1) / world,
    }
    if on_gpu:
        result["device_name"] = torch.cuda.get_device_name(device)
    dist.barrier()
    dist.destroy_process_group()
    emit("result", **result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

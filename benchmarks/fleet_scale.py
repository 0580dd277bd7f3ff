"""How long `cuda-doctor fleet` takes to read and compare N node reports, and its memory.

Generates N realistic 8-GPU H200 node reports (facts shaped like the recorded H200 machine,
per-GPU NVML facts, smoke figures with run-to-run wobble, 40 rule results; a few nodes with
another driver, a slow GPU or a failing rule), written as `check --save` writes them (indented
JSON), into a temporary directory, once for the largest N (the smaller sets are hard links to
its first files).  Each measurement is a fresh process that does what `fleet DIR` does: list
the directory, read every report keeping what the comparison needs (worker processes as
`--jobs 0` chooses), compare; it prints the wall time, CPU time and peak RSS.  Each N is
measured with the standard library's JSON decoder and, when installed, with msgspec (the
`fast` extra); the table gives the median of the runs: the wall time, the CPU time of the
process and its workers, and the critical path (this process's CPU time and one worker's
share of theirs: the wall time on an idle machine with a CPU per worker), and at the end, for the
largest N, each output side by side (text, text of every node, Markdown, JSON, HTML): the time
to render it, and the wall time of the whole `fleet` command that writes it.  The files are in
the page cache (just written), as after gathering them; the machine's load average is printed,
since other work on it slows every figure.

    python benchmarks/fleet_scale.py                    # N = 100, 1000, 3000, 10000; 3 runs each
    python benchmarks/fleet_scale.py 100 1000 --runs 1 --jobs 1
    python benchmarks/fleet_scale.py 20000 --runs 1     # the text output against the HTML one
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GPUS = 8
# The recorded H200 (torch 2.11.0+cu130, driver 580.159.04) figures.
FIGURES = {
    "bf16_tflops": 768.6,
    "fp16_tflops": 734.9,
    "fp32_tflops": 51.0,
    "h2d_pinned_gbps": 55.2,
    "h2d_pageable_gbps": 18.1,
    "d2h_pinned_gbps": 53.0,
    "launch_us": 7.64,
}


def node_report(i: int, rng: random.Random) -> dict[str, Any]:
    host = f"node{i:05d}"
    driver, cuda = ("570.195.03", "12.8") if i % 97 == 3 else ("580.159.04", "13.0")
    v: dict[str, Any] = {
        "driver.status": "ok",
        "driver.source": "nvml",
        "driver.version": driver,
        "driver.cuda_version": cuda,
        "gpu.count": GPUS,
        "torch.installed": True,
        "torch.version": "2.11.0+cu130",
        "torch.cuda_build": "13.0",
        "torch.cudnn_version": 91900,
        "torch.nccl_version": "2.28.9",
        "torch.device_names": ["NVIDIA H200"] * GPUS,
        "container.cuda_version": "13.0.2",
        "system.hostname": host,
        "smoke.status": "ok",
        "env.nccl": {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5"},
    }
    for g in range(GPUS):
        p = f"gpu[{g}]."
        v.update(
            {
                p + "index": g,
                p + "name": "NVIDIA H200",
                p + "uuid": f"GPU-{i:08x}-{g:04x}",
                p + "pci_bus_id": f"00000000:{g:02x}:00.0",
                p + "compute_capability": "9.0",
                p + "memory_total_mib": 143771,
                p + "memory_used_mib": 0,
                p + "ecc_enabled": True,
                p + "ecc_uncorrected_volatile": 0,
                p + "retired_pages_pending": False,
                p + "remapped_rows_pending": False,
                p + "remapped_rows_failure": False,
                p + "persistence_mode": True,
                p + "mig_enabled": False,
                p + "pcie_gen_current": 5,
                p + "pcie_gen_max": 5,
                p + "pcie_width_current": 16,
                p + "pcie_width_max": 16,
                p + "clock_event_reasons": 1,
                p + "clock_event_reason_names": ["gpu_idle"],
                p + "temperature_c": 36,
                p + "power_w": 78.0,
                p + "power_limit_w": 700.0,
                p + "processes": [],
                p + "process_count": 0,
            }
        )
        slow = 0.6 if i % 211 == 7 and g == 5 else 1.0
        s = f"smoke[{g}]."
        for key, value in FIGURES.items():
            v[s + key] = round(value * slow * rng.gauss(1.0, 0.01), 3)
        for key in ("vector_add_ok", "matmul_ok", "conv_ok", "amp_step_ok"):
            v[s + key] = True
    results = [
        {
            "rule": f"CD{100 + r}",
            "title": f"Check {r}",
            "category": "driver",
            "status": "fail" if (r == 7 and i % 153 == 0) else "pass",
            "subject": None,
            "message": "a message of ordinary length for a rule outcome",
            "fix": None,
            "commands": [],
            "links": ["https://docs.nvidia.com/deploy/cuda-compatibility/"],
            "evidence": {"driver.version": driver},
        }
        for r in range(40)
    ]
    return {
        "schema": "cuda-doctor/report",
        "schema_version": 1,
        "tool": {"name": "cuda-doctor", "version": "0.1.0"},
        "host": host,
        "created": "2026-11-29T10:00:00+00:00",
        "command": "check",
        "facts": {"values": v, "unknown": {"tensorflow.version": "not installed"}},
        "results": results,
        "summary": {"pass": 40, "exit_code": 0},
    }


def write_reports(directory: Path, n: int) -> float:
    """N report files in ``directory``; returns their size in MB."""
    rng = random.Random(n)
    size = 0
    for i in range(n):
        text = json.dumps(node_report(i, rng), indent=2)
        size += len(text)
        (directory / f"node{i:05d}.json").write_text(text)
    return size / 1e6


def linked_subset(source: Path, target: Path, n: int) -> float:
    """The first N files of ``source`` as hard links in ``target``; returns their size in MB."""
    target.mkdir()
    size = 0
    for path in sorted(source.glob("*.json"))[:n]:
        os.link(path, target / path.name)
        size += path.stat().st_size
    return size / 1e6


def measure(directory: str, decoder: str, jobs: int, render: bool) -> dict[str, Any]:
    """One fleet run in this process (a fresh one): what `cuda-doctor fleet DIR` does."""
    from cuda_doctor.compare.fleet import FLEET_FIELDS, compare_fleet
    from cuda_doctor.core import reportfile

    if decoder == "stdlib":
        reportfile.fast_decoder = lambda: None  # what a system without msgspec runs
    elif reportfile.fast_decoder() is None:
        raise SystemExit("msgspec is not installed (pip install 'cuda-doctor[fast]')")
    own0, children0 = _cpu()
    start = time.perf_counter()
    reports, errors, _ = reportfile.load_unique([directory], FLEET_FIELDS, jobs)
    loaded = time.perf_counter()
    fleet = compare_fleet(reports, errors)
    compared = time.perf_counter()
    out: dict[str, Any] = {
        "load": loaded - start,
        "compare": compared - loaded,
        "total": compared - start,
        "cpu": sum(_cpu()) - own0 - children0,
        # On an idle machine with a CPU per worker: this process's CPU time, and one worker's share.
        "critical": _cpu()[0] - own0 + (_cpu()[1] - children0) / _workers(len(reports) + len(errors), jobs),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "nodes": len(fleet.nodes),
        "errors": len(fleet.errors),
        "differing": len(fleet.differing),
        "outliers": len(fleet.outliers),
    }
    if render:
        from cuda_doctor.report.compare import render_fleet

        for name, (fmt, all_nodes) in RENDERINGS.items():
            began = time.perf_counter()
            text = render_fleet(fleet, fmt, color=False, width=None, all_nodes=all_nodes)
            out[f"render {name}"] = time.perf_counter() - began
            out[f"size {name}"] = len(text.encode()) / 1e6
    return out


#: What is rendered and run end to end: name → (--format, --all-nodes).  HTML always lists every node.
RENDERINGS = {
    "text": ("text", False),
    "text --all-nodes": ("text", True),
    "markdown": ("markdown", False),
    "json": ("json", False),
    "html": ("html", False),
}


def run_command(directory: Path, fmt: str, all_nodes: bool, runs: int, jobs: int) -> float:
    """The median wall time of ``cuda-doctor fleet DIR --format FMT -o FILE``, a fresh process each run."""
    argv = [sys.executable, "-m", "cuda_doctor", "fleet", str(directory), "--format", fmt, "--jobs", str(jobs)]
    argv += ["--all-nodes"] if all_nodes else []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times = []
    with tempfile.TemporaryDirectory(prefix="fleet-out-") as out:
        for _ in range(runs):
            began = time.perf_counter()
            proc = subprocess.run([*argv, "-o", f"{out}/fleet.{fmt}"], capture_output=True, text=True, env=env)
            times.append(time.perf_counter() - began)
            if proc.returncode != 0:
                raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return statistics.median(times)


def _cpu() -> tuple[float, float]:
    """CPU seconds (user and system) of this process, and of its ended children (the workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _workers(files: int, jobs: int) -> int:
    from cuda_doctor.base import parallel
    from cuda_doctor.core.reportfile import REPORTS_PER_JOB

    if jobs == 1 or not parallel.available():
        return 1
    return min(jobs or parallel.default_jobs(files, REPORTS_PER_JOB), files)


def run_child(directory: Path, decoder: str, jobs: int, render: bool = False) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--measure", str(directory), "--decoder", decoder, "--jobs", str(jobs)]
    proc = subprocess.run([*argv, *(["--render"] if render else [])], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"measuring {directory} with {decoder} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def decoders() -> list[str]:
    from cuda_doctor.core.reportfile import fast_decoder

    return ["stdlib", "msgspec"] if fast_decoder() is not None else ["stdlib"]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 3000, 10000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=0, help="as fleet --jobs (0: chosen from the CPUs and files)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--decoder", default="msgspec", help=argparse.SUPPRESS)
    parser.add_argument("--render", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.decoder, args.jobs, args.render)))
        return
    names = decoders()
    if len(names) == 1:
        print("msgspec is not installed: the standard library's decoder only (pip install 'cuda-doctor[fast]')")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start; --jobs {args.jobs}")
    head = f"{'N':>6} {'MB':>6}" + "".join(f" {d + ' s':>11} {'cpu s':>6} {'crit s':>6}" for d in names)
    print(head + f" {'peak RSS MB':>12} {'worker MB':>10} {'differ':>7} {'outliers':>9}")
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        everything = Path(tmp) / "all"
        everything.mkdir()
        write_reports(everything, max(args.sizes))
        last: dict[str, Any] = {}
        for n in sorted(args.sizes):
            directory = Path(tmp) / f"n{n}"
            mb = linked_subset(everything, directory, n)
            line = f"{n:>6} {mb:>6.1f}"
            for name in names:
                runs = [run_child(directory, name, args.jobs) for _ in range(args.runs)]
                for r in runs:
                    if r["nodes"] != n or r["errors"]:
                        raise SystemExit(f"expected {n} readable reports, got {r['nodes']} and {r['errors']} errors")
                line += f" {statistics.median(r['total'] for r in runs):>11.3f}"
                line += f" {statistics.median(r['cpu'] for r in runs):>6.2f}"
                line += f" {statistics.median(r['critical'] for r in runs):>6.2f}"
                last = runs[-1]
            line += f" {last['rss_mb']:>12.0f} {last['worker_rss_mb']:>10.0f}"
            print(f"{line} {last['differing']:>7} {last['outliers']:>9}", flush=True)
        biggest = Path(tmp) / f"n{max(args.sizes)}"
        r = run_child(biggest, names[-1], args.jobs, render=True)
        print(f"\n{max(args.sizes)} nodes, each output side by side: rendering it (in one process, after")
        print("reading and comparing), and the whole command (`fleet DIR --format … -o FILE`, median of")
        print(f"{args.runs} fresh processes: reading and comparing included, the same for every format)")
        print(f"{'output':<18} {'render s':>9} {'MB':>6} {'command s':>10}")
        for name, (fmt, all_nodes) in RENDERINGS.items():
            whole = run_command(biggest, fmt, all_nodes, args.runs, args.jobs)
            print(f"{name:<18} {r[f'render {name}']:>9.3f} {r[f'size {name}']:>6.1f} {whole:>10.2f}", flush=True)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main(sys.argv[1:])

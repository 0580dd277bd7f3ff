"""Wall time of `cuda-doctor check --fast`, `check --no-smoke` and the full `check` against references.

Targets (measured side by side, interleaved round by round, median of N runs):
  check --fast     ≤ 1.5 ×  python -c "import pynvml, click, rich"
  check --no-smoke ≤ 1.15 × python -c "import torch; torch.cuda.init()"  (same interpreter as --python)
  check            ≤ 1.7 ×  python -c "import torch; torch.cuda.init()"  (the full check: facts and smoke run)

On a machine with several GPUs the fast part also prints what each GPU adds to the NVML read
(the marginal cost in ms and the driver round trips per GPU, benchmarks/nvml_per_gpu.py).

Usage: python benchmarks/check_speed.py [--runs 10] [--torch-python PATH] [--fast-only | --full-only | --no-smoke-only]
(--full-only measures exactly the full `check --python PATH` against that reference, --no-smoke-only
`check --no-smoke --python PATH`.)
Byte-code is compiled first (as `pip install` does), so imports are measured as users meet them.
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Seconds between two timed commands (see ``compare``).
PAUSE = 0.03


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def compare(
    base: list[str], doctors: dict[str, list[str]], env: dict[str, str], runs: int, targets: dict[str, float]
) -> dict[str, float]:
    """Run the reference and each cuda-doctor command in turn, ``runs`` rounds, so that a
    machine that slows down or speeds up meanwhile weighs on all of them alike.

    Each round runs them in a shuffled order (a fixed seed), with a pause before each: a GPU
    process's end goes on in the driver after its exit, and a command that always followed one
    would always pay for it (on an H200, a fixed order moved one median by 7 ms)."""
    for argv in (base, *doctors.values()):
        timed(argv, env)  # warm the file cache
    commands = {"reference": base, **doctors}
    samples: dict[str, list[float]] = {name: [] for name in commands}
    order = random.Random(7)
    for _ in range(runs):
        names = list(commands)
        order.shuffle(names)
        for name in names:
            time.sleep(PAUSE)
            samples[name].append(timed(commands[name], env))
    reference = statistics.median(samples["reference"])
    ratios = {}
    for name in doctors:
        mine = statistics.median(samples[name])
        ratios[name] = mine / reference
        verdict = "ok" if mine / reference <= targets[name] else "OVER TARGET"
        print(
            f"{name:<18} reference {reference:7.3f} s   cuda-doctor {mine:7.3f} s   "
            f"ratio {mine / reference:5.2f} (target ≤ {targets[name]}) {verdict}"
        )
    return ratios


def per_gpu_cost(runs: int) -> None:
    """With two or more GPUs: the fast read's marginal cost and round trips per GPU."""
    import nvml_per_gpu  # beside this file

    try:
        probe = nvml_per_gpu.child(["1024", "fast"])
    except SystemExit as exc:  # no NVML for this interpreter: nothing per GPU to say
        print(f"per GPU: not measured ({exc})")
        return
    gpus = probe.get("gpus") if isinstance(probe, dict) else None
    if isinstance(gpus, int) and gpus > 1:
        print(f"per GPU, {gpus} GPUs (the fast check's NVML read; benchmarks/nvml_per_gpu.py):")
        nvml_per_gpu.measure("fast", gpus, max(3, runs // 2))


def _jax_version(python: str) -> str | None:
    probe = (
        "import importlib.metadata as m\ntry:\n    print(m.version('jax'))\nexcept m.PackageNotFoundError:\n    pass"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--fast-only", action="store_true", help="measure only the --fast pairs")
    only.add_argument("--full-only", action="store_true", help="measure only the full check against its reference")
    only.add_argument("--no-smoke-only", action="store_true", help="measure only check --no-smoke and its reference")
    parser.add_argument(
        "--torch-python", default=None, help="interpreter with torch (default: .cache/torch-cpu-venv, else this one)"
    )
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    compileall.compile_dir(str(REPO / "cuda_doctor"), quiet=1)
    py = sys.executable
    doctor = [py, "-m", "cuda_doctor", "check", "--format", "json"]
    print(f"python {sys.version.split()[0]} on {os.uname().nodename}, {args.runs} runs each, medians")
    reference = [py, "-c", "import pynvml, click, rich"]
    fast = {
        "check --fast": [*doctor, "--fast"],
        "check --fast text": [py, "-m", "cuda_doctor", "check", "--fast"],  # the default format, as a hook prints it
    }
    if not args.full_only and not args.no_smoke_only:
        compare(reference, fast, env, args.runs, dict.fromkeys(fast, 1.5))
        per_gpu_cost(args.runs)
    if args.fast_only:
        return
    torch_py = args.torch_python
    if torch_py is None:
        cached = REPO / ".cache" / "torch-cpu-venv" / "bin" / "python"
        torch_py = str(cached) if cached.exists() else py
    if subprocess.run([torch_py, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"check, check --no-smoke   skipped: no torch in {torch_py}")
        return
    init = "import torch\ntry:\n    torch.cuda.init()\nexcept Exception:\n    pass"
    jax = _jax_version(torch_py) or "not installed"
    print(f"jax in {torch_py}: {jax} (when installed, every check runs a JAX child beside the torch child)")
    with_torch = {} if args.no_smoke_only else {"check": [*doctor, "--python", torch_py]}
    targets = {"check": 1.7}
    if not args.full_only:
        with_torch["check --no-smoke"] = [*doctor, "--no-smoke", "--python", torch_py]
        targets["check --no-smoke"] = 1.15
    compare([torch_py, "-c", init], with_torch, env, args.runs, targets)
    if shutil.which("nvidia-smi") is None:
        print("(no nvidia-smi here: the GPU probe answers 'no driver' quickly; measure on a GPU machine too)")


if __name__ == "__main__":
    main()

"""A timeline of one `cuda-doctor check --fast`: when each import starts, when each thread starts,
when the NVML facts are ready, when judging and rendering start and end.

Times are milliseconds since this script began, which is after interpreter start-up (compare
`python -c pass` in fast_profile.py).  Run it a few times; the first run warms the file cache.

Usage: python benchmarks/fast_timeline.py [--format json|text] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time
T0 = time.perf_counter()
events = []
def mark(what):
    events.append(((time.perf_counter() - T0) * 1000, what))
seen = set()
def hook(event, args):
    if event == "import" and args[0] not in seen:
        name = args[0]
        seen.add(name)
        if name.split(".")[0] in ("cuda_doctor", "pynvml", "click", "json", "dataclasses", "packaging"):
            mark("import " + name)
sys.addaudithook(hook)
import threading
_start = threading.Thread.start
def start(self):
    mark("thread " + self.name.split(" ")[0])
    _start(self)
threading.Thread.start = start
import cuda_doctor.gpu.nvml.read as nvml  # light: facts, base, the nvml package
_run = nvml.NvmlRead._run
def run(self):
    _ready = self.ready.set
    def ready():
        mark("nvml facts ready")
        _ready()
    self.ready.set = ready
    _run(self)
nvml.NvmlRead._run = run
import os
PROFILE = os.environ.get("TIMELINE_PROFILE")
def wrap(module, name):
    def wrapper(*args, **kwargs):
        mark(name + " start")
        profiler = None
        if PROFILE and name in ("judge_facts", "render"):
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
        try:
            return original(*args, **kwargs)
        finally:
            if profiler is not None:
                profiler.disable()
                import io, pstats
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
                sys.stderr.write("PROFILE " + name + "\n" + text.getvalue() + "END PROFILE\n")
            mark(name + " end")
    original = getattr(module, name)
    setattr(module, name, wrapper)
import importlib.machinery
PATCHES = {
    "cuda_doctor.core.pipeline": ("gather", "judge_facts"),
    "cuda_doctor.commands.check": ("render",),
}
class AfterImport:
    # wraps functions of a module right after it is imported (importing it earlier would
    # change the very order being measured)
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        exec_module = spec.loader.exec_module
        def patched(module):
            exec_module(module)
            for name in PATCHES[fullname]:
                wrap(module, name)
        spec.loader.exec_module = patched
        return spec
sys.meta_path.insert(0, AfterImport())
import cuda_doctor.entry as entry
import os
_exit = os._exit
def end(code):
    mark("end")
    sys.stderr.write("\n".join(f"{t:8.2f} {w}" for t, w in events) + "\n")
    sys.stderr.flush()
    _exit(code)
os._exit = end
sys.argv = ["cuda-doctor", "check", "--fast", *sys.argv[1:]]
entry.main()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", default="json", choices=["json", "text"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of judging and rendering")
    args = parser.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    import compileall

    compileall.compile_dir(str(REPO / "cuda_doctor"), quiet=1)
    runs: list[dict[str, float]] = []
    order: list[str] = []
    for _ in range(args.runs + 1):  # the first warms the file cache
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, "--format", args.format],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        events: dict[str, float] = {}
        for line in proc.stderr.splitlines():
            parts = line.strip().split(" ", 1)
            if len(parts) == 2:
                try:
                    events.setdefault(parts[1], float(parts[0]))
                except ValueError:
                    continue
                if parts[1] not in order:
                    order.append(parts[1])
        runs.append(events)
    runs = runs[1:]
    if args.profile:
        env["TIMELINE_PROFILE"] = "1"
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, "--format", args.format],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        inside = False
        for line in proc.stderr.splitlines():
            inside = inside or line.startswith("PROFILE")
            if inside:
                print(line)
            inside = inside and not line.startswith("END PROFILE")
    print(
        f"python {sys.version.split()[0]} on {os.uname().nodename}: check --fast --format {args.format}, "
        f"median of {args.runs} runs, ms since the script began"
    )
    for what in order:
        times = [run[what] for run in runs if what in run]
        if times:
            print(f"  {statistics.median(times):8.2f}  {what}")


if __name__ == "__main__":
    main()

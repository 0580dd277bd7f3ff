"""The `fleet --format html` page at scale, in a real headless Chromium, and its screenshot.

For each N, writes N node reports (benchmarks/fleet_scale.py's 8-GPU H200 nodes: a few with
another driver, a slow GPU or a failing rule), renders the page as `cuda-doctor fleet DIR
--format html` does, loads it from its file:// URL in Chromium over the DevTools protocol and
reports: the page's size, the time to render it in Python, the browser's time to its load
event (parsing, style, layout) and to the first paint, and the time one click on a header of
the node table takes to sort it (measured in the page, layout included).  Nothing is asserted.

    python benchmarks/fleet_page.py                 # N = 100, 1000, 10000
    python benchmarks/fleet_page.py 1000 --screenshot docs/fleet-page.png

--screenshot writes a PNG of the top of the page of a small fleet (--screenshot-nodes, 16):
docs/fleet-page.png is made so.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "report" / "compare"))
sys.path.insert(0, str(ROOT / "tests" / "compare"))

import chromium  # noqa: E402  (the test suite's DevTools client)
from fleet_scale import node_report  # noqa: E402

from cuda_doctor.compare.fleet import FLEET_FIELDS, compare_fleet  # noqa: E402
from cuda_doctor.core.reportfile import load_unique  # noqa: E402
from cuda_doctor.report.compare import render_fleet  # noqa: E402

_SORT = """(() => {
  const button = document.querySelector('#nodes th:nth-child(%d) button');
  const start = performance.now();
  button.click();
  document.body.getBoundingClientRect();  // layout, as the next frame needs it
  return performance.now() - start;
})()"""


def write_fleet(directory: Path, n: int, h100: int = 0) -> None:
    rng = random.Random(n)
    for i in range(n):
        report = node_report(i, rng)
        if i >= n - h100:  # the last nodes are another model: a second chart
            values = report["facts"]["values"]
            for key in [k for k in values if k.startswith("smoke[")]:
                if isinstance(values[key], float) and not key.endswith("launch_us"):
                    values[key] = round(values[key] * 0.62, 3)
            for g in range(8):
                values[f"gpu[{g}].name"] = "NVIDIA H100 80GB HBM3"
            values["torch.device_names"] = ["NVIDIA H100 80GB HBM3"] * 8
        (directory / f"{report['host']}.json").write_text(json.dumps(report, indent=2))


def page_for(directory: Path) -> tuple[str, float, int]:
    reports, errors, repeated = load_unique([directory], FLEET_FIELDS, 0)
    fleet = compare_fleet(reports, errors, repeated=repeated)
    start = time.perf_counter()
    text = render_fleet(fleet, "html")
    return text, time.perf_counter() - start, len(fleet.outliers)


def measure(binary: str, page: Path, profile: Path) -> dict[str, Any]:
    with chromium.DevTools(binary, profile) as tools:
        load = tools.open(page.as_uri())
        timing = tools.evaluate(
            "(() => { const t = performance.getEntriesByType('navigation')[0];"
            " return [t.domContentLoadedEventEnd, t.loadEventEnd]; })()"
        )
        dom = tools.evaluate("document.getElementsByTagName('*').length")
        sorts = [tools.evaluate(_SORT % column) for column in (1, 1, 2, 10, 1)]
        problems = tools.problems()
    return {
        "load": load,
        "dom_ms": timing[0],
        "load_ms": timing[1],
        "elements": dom,
        "sort_ms": statistics.median(sorts),
        "problems": problems,
    }


def demo_fleet(directory: Path, nodes: int) -> None:
    """The screenshot's fleet: the recorded H200 machine (tests/compare/compare_reports.py) on
    every node, with run-to-run wobble; one node on another driver, one whose prolog environment
    names a GPU that is not there (CD401), one with a slow GPU."""
    from compare_reports import base_report, other_driver, scaled, slower_gpu, write

    wobble = (1.0, 1.01, 0.99, 1.02, 0.98, 1.005, 0.995, 1.015)
    for i in range(1, nodes + 1):
        host = f"gpu-{i:02d}"
        report = scaled(base_report(host=host, gpus=8), wobble[i % len(wobble)])
        if i == 3:
            report = other_driver(report)
        if i == 5:
            report["results"].append(
                {
                    "rule": "CD401",
                    "title": "CUDA_VISIBLE_DEVICES names GPUs that exist",
                    "category": "environment",
                    "status": "fail",
                    "subject": None,
                    "message": "CUDA_VISIBLE_DEVICES=7 names no GPU: this process sees none",
                }
            )
        if i == nodes - 2:
            report = slower_gpu(report, 0.72, gpu=4)
        write(directory / f"{host}.json", report)


def screenshot(binary: str, nodes: int, target: Path, tmp: Path) -> None:
    directory = tmp / "shot"
    directory.mkdir()
    demo_fleet(directory, nodes)
    text, _, _ = page_for(directory)
    page = tmp / "shot.html"
    page.write_text(text)
    with chromium.DevTools(binary, tmp / "profile-shot", width=1000, height=1350) as tools:
        tools.open(page.as_uri())
        tools.evaluate("window.scrollTo(0, 0)")
        tools.screenshot(target)
    width, height = chromium.png_size(target)
    print(f"screenshot: {target} ({width}×{height}, {target.stat().st_size / 1024:.0f} KiB)")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 10000])
    parser.add_argument("--screenshot", type=Path, help="write a PNG of a small fleet's page here")
    parser.add_argument("--screenshot-nodes", type=int, default=16)
    args = parser.parse_args(argv)
    binary = chromium.find()
    if binary is None:
        raise SystemExit(f"no Chromium found ({', '.join(chromium.NAMES)}): apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="fleet-page-") as name:
        tmp = Path(name)
        if args.screenshot:
            screenshot(binary, args.screenshot_nodes, args.screenshot, tmp)
        head = f"{'N':>6} {'page MB':>8} {'render s':>9} {'elements':>9}"
        print(head + f" {'DOM ms':>7} {'load ms':>8} {'CDP s':>6} {'sort ms':>8}")
        for n in args.sizes:
            directory = tmp / f"n{n}"
            directory.mkdir()
            write_fleet(directory, n)
            text, render, _ = page_for(directory)
            page = tmp / f"n{n}.html"
            page.write_text(text)
            r = measure(binary, page, tmp / f"profile-{n}")
            print(
                f"{n:>6} {len(text.encode()) / 1e6:>8.2f} {render:>9.3f} {r['elements']:>9} {r['dom_ms']:>7.0f}"
                f" {r['load_ms']:>8.0f} {r['load']:>6.2f} {r['sort_ms']:>8.1f}",
                flush=True,
            )
            if r["problems"]:
                print(f"  browser problems: {r['problems']}")


if __name__ == "__main__":
    main(sys.argv[1:])

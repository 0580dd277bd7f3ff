"""``fleet --format html``: one self-contained page, read as a parser reads it and as a real
headless Chromium renders it (screenshot, rendered DOM, mouse clicks on the table headers)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import chromium
import pytest
from click.testing import CliRunner
from compare_reports import base_report, failing_rule, other_driver, other_torch, scaled, slower_gpu, write

from cuda_doctor.cli import cli
from cuda_doctor.compare.fleet import FLEET_FIELDS, Fleet, compare_fleet
from cuda_doctor.core.reportfile import load_unique
from cuda_doctor.report.compare import html as page
from cuda_doctor.report.compare import render_fleet

WOBBLE = (1.0, 1.01, 0.99, 1.02, 0.98, 1.005, 0.995, 1.015)
#: Markup no report string may ever become.
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>&amp; "q" \'s\' </title>'


def fleet_dir(tmp_path: Path, changes: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> Path:
    """12 eight-GPU H200 nodes gpu-1 … gpu-12 (files sort gpu-1, gpu-10, …), with ``changes``."""
    folder = tmp_path / "reports"
    folder.mkdir()
    for i in range(1, 13):
        host = f"gpu-{i}"
        report = scaled(base_report(host=host, gpus=8), WOBBLE[i % len(WOBBLE)])
        if host in changes:
            report = changes[host](report)
        write(folder / f"{host}.json", report)
    return folder


def usual_changes() -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    return {
        "gpu-3": other_driver,
        "gpu-8": lambda r: other_torch(r, nccl="2.28.9"),
        "gpu-5": failing_rule,
        "gpu-10": lambda r: slower_gpu(r, gpu=2),
    }


def hostile(report: dict[str, Any]) -> dict[str, Any]:
    out = failing_rule(other_driver(report, version=HOSTILE))
    out["host"] = HOSTILE
    for r in out["results"]:
        if r["status"] == "fail":
            r["subject"] = HOSTILE
    return out


def fleet_of(folder: Path) -> Fleet:
    reports, errors, repeated = load_unique([folder], FLEET_FIELDS)
    return compare_fleet(reports, errors, repeated=repeated)


class Page(HTMLParser):
    """Every element (tag, attributes, its own text), in document order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict[str, Any]] = []
        self._open: list[dict[str, Any]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(element)
        if tag not in ("meta", "br", "img", "input", "link"):
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element["text"] += data

    def find(self, tag: str, **attrs: str) -> list[dict[str, Any]]:
        def matches(e: dict[str, Any]) -> bool:
            if e["tag"] != tag:
                return False
            for name, value in attrs.items():
                have = e["attrs"].get(name.rstrip("_").replace("_", "-"))
                if have is None or (value not in have.split() if name == "class_" else have != value):
                    return False
            return True

        return [e for e in self.elements if matches(e)]

    def rows(self, table: str) -> list[dict[str, Any]]:
        """The body rows of the table with id ``table``."""
        inside, out = False, []
        for e in self.elements:
            if e["tag"] == "table":
                inside = e["attrs"].get("id") == table
            elif inside and e["tag"] == "tr" and "data-host" in e["attrs"]:
                out.append(e)
        return out


def check_findings(doc: Page, fleet: Fleet) -> None:
    """What the page must show of the usual fleet, whoever parsed or rendered it."""
    majority = doc.find("table", id="majority")
    assert majority and "580.159.04" in majority[0]["text"] and "NVIDIA H200" in majority[0]["text"]
    assert any("Majority configuration: 10 of 12 nodes" in h["text"] for h in doc.find("h2"))
    differing = {r["attrs"]["data-host"] for r in doc.rows("differing")}
    assert differing == {"gpu-3", "gpu-8"}
    assert all("differs" in r["attrs"]["class"].split() for r in doc.rows("differing"))
    nodes = {r["attrs"]["data-host"]: r for r in doc.rows("nodes")}
    assert len(nodes) == 12
    assert "differs" in nodes["gpu-3"]["attrs"]["class"] and "differs" not in nodes["gpu-4"]["attrs"].get("class", "")
    marked = [c for c in doc.find("td", class_="differs-cell") if "title" in c["attrs"]]  # the node table's
    assert [(c["text"], c["attrs"]["title"]) for c in marked if c["text"] == "570.195.03"] == [
        ("570.195.03", "majority: 580.159.04")
    ]
    assert [r["attrs"]["data-host"] for r in doc.rows("failing")] == ["gpu-5"]
    assert "CD310" in nodes["gpu-5"]["text"]
    marks = doc.find("circle", class_="outlier")
    assert len(marks) == len(fleet.outliers) == 2  # bf16 and fp16 of gpu-10's GPU 2
    assert {(m["attrs"]["data-host"], m["attrs"]["data-gpu"]) for m in marks} == {("gpu-10", "2")}
    assert {m["attrs"]["data-metric"] for m in marks} == {"bf16_tflops", "fp16_tflops"}
    assert all("slow" in m["attrs"]["class"].split() for m in marks)
    assert all(re.search(r"gpu-10 GPU 2: \S+ matmul .* = 0\.\d\d× the median", m["text"]) for m in marks)
    assert len(doc.find("svg", data_model="NVIDIA H200")) == 1


def test_the_page_shows_the_majority_the_differing_nodes_failing_rules_and_outliers(tmp_path: Path) -> None:
    fleet = fleet_of(fleet_dir(tmp_path, usual_changes()))
    check_findings(Page(render_fleet(fleet, "html")), fleet)


def test_the_page_fetches_nothing_and_runs_only_its_own_script(tmp_path: Path) -> None:
    text = render_fleet(fleet_of(fleet_dir(tmp_path, usual_changes())), "html")
    doc = Page(text)
    for e in doc.elements:
        assert not ({"src", "href", "srcset", "action", "formaction", "background"} & set(e["attrs"])), e
        assert e["tag"] not in ("link", "img", "iframe", "object", "embed", "base", "form", "audio", "video")
    assert re.search(r"url\(|@import|https?://", "".join(e["text"] for e in doc.find("style"))) is None
    (script,) = doc.find("script")
    (style,) = doc.find("style")
    assert script["text"] == page._JS and style["text"] == page._CSS
    (csp,) = doc.find("meta", http_equiv="Content-Security-Policy")
    policy = csp["attrs"]["content"]
    assert policy.startswith("default-src 'none';")
    assert page._csp_hash(page._JS) in policy and page._csp_hash(page._CSS) in policy
    assert "unsafe-inline" not in policy


def test_every_string_from_a_report_stays_text(tmp_path: Path) -> None:
    folder = fleet_dir(tmp_path, {**usual_changes(), "gpu-7": hostile})
    (folder / "broken.json").write_text("{")
    fleet = fleet_of(folder)
    text = render_fleet(fleet, "html")
    doc = Page(text)
    allowed = {"html", "head", "meta", "title", "style", "body", "header", "main", "h1", "h2", "div", "ul", "li"}
    allowed |= {"b", "p", "span", "table", "caption", "thead", "tbody", "tr", "th", "td", "button", "figure"}
    allowed |= {"figcaption", "svg", "line", "text", "tspan", "path", "circle", "script"}
    assert {e["tag"] for e in doc.elements} <= allowed
    assert len(doc.find("script")) == 1 and "pwned" not in doc.find("script")[0]["text"]
    assert "<img" not in text and "<script>window" not in text
    # ... and reads back as the very string, in text and in attributes alike
    (row,) = [r for r in doc.rows("nodes") if r["attrs"]["data-host"] == HOSTILE]
    assert row["text"].startswith(HOSTILE)
    assert any(c["text"] == HOSTILE for c in doc.find("td", class_="differs-cell"))
    (failing,) = [r for r in doc.rows("failing") if r["attrs"]["data-host"] == HOSTILE]
    assert f"CD310 ({HOSTILE})" in failing["text"]
    assert any(e["text"].startswith(str(folder / "broken.json")) for e in doc.find("td"))


def test_control_characters_are_shown_as_escapes(tmp_path: Path) -> None:
    def spoofed(report: dict[str, Any]) -> dict[str, Any]:
        report["host"] = "gpu-\u202e9-upg\x1b]2;title\x07\x00"  # a right-to-left override, OSC, NUL
        return report

    text = render_fleet(fleet_of(fleet_dir(tmp_path, {"gpu-9": spoofed})), "html")
    assert "\u202e" not in text and "\x1b" not in text and "\x00" not in text
    hosts = [r["attrs"]["data-host"] for r in Page(text).rows("nodes")]
    assert "gpu-\\u202e9-upg\\x1b]2;title\\x07\\x00" in hosts


def test_fleet_writes_the_page_with_output(tmp_path: Path) -> None:
    folder = fleet_dir(tmp_path, usual_changes())
    target = tmp_path / "out" / "fleet.html"
    result = CliRunner().invoke(cli, ["fleet", str(folder), "--format", "html", "--output", str(target)])
    assert result.exit_code == 0, result.output
    assert result.output == ""
    assert target.read_text().startswith("<!DOCTYPE html>")
    check_findings(Page(target.read_text()), fleet_of(folder))
    diff = CliRunner().invoke(cli, ["diff", str(folder / "gpu-1.json"), str(folder / "gpu-2.json"), "--format", "html"])
    assert diff.exit_code == 2 and "'html' is not one of" in diff.output  # a page is for fleets only


# -- in a real browser ----------------------------------------------------------------------------


@pytest.mark.browser
def test_chromium_renders_the_page_from_a_file(tmp_path: Path, browser_binary: str) -> None:
    fleet = fleet_of(fleet_dir(tmp_path, usual_changes()))
    path = tmp_path / "fleet.html"
    path.write_text(render_fleet(fleet, "html"))
    shot = tmp_path / "fleet.png"
    done = chromium.run_cli(
        browser_binary, tmp_path / "profile-1", f"--screenshot={shot}", "--window-size=1280,1600", path.as_uri()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert chromium.png_size(shot) == (1280, 1600)
    assert shot.stat().st_size > 20_000  # a page of tables and a chart, not a blank one
    dumped = chromium.run_cli(browser_binary, tmp_path / "profile-2", "--dump-dom", path.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    check_findings(Page(dumped.stdout), fleet)


def _order(tools: chromium.DevTools, table: str) -> list[str]:
    return tools.evaluate(f"Array.from(document.querySelectorAll('#{table} tbody tr')).map(r => r.dataset.host)")


@pytest.mark.browser
def test_clicking_a_header_sorts_the_rows(tmp_path: Path, browser_binary: str) -> None:
    fleet = fleet_of(fleet_dir(tmp_path, usual_changes()))
    path = tmp_path / "fleet.html"
    path.write_text(render_fleet(fleet, "html"))
    with chromium.DevTools(browser_binary, tmp_path / "profile") as tools:
        tools.open(path.as_uri())
        as_listed = _order(tools, "nodes")
        assert as_listed[:4] == ["gpu-1", "gpu-10", "gpu-11", "gpu-12"]  # the files' order
        tools.click("#nodes th:nth-child(1) button")
        natural = [f"gpu-{i}" for i in range(1, 13)]
        assert _order(tools, "nodes") == natural  # gpu-2 before gpu-10
        assert tools.evaluate("document.querySelector('#nodes th:nth-child(1)').getAttribute('aria-sort')") == (
            "ascending"
        )
        tools.click("#nodes th:nth-child(1) button")
        assert _order(tools, "nodes") == natural[::-1]
        outliers_column = "#nodes th:last-child button"  # numeric: the outlier figures per node
        tools.click(outliers_column)
        tools.click(outliers_column)
        assert _order(tools, "nodes")[0] == "gpu-10"  # descending: the node with outliers first
        driver = "#nodes th:nth-child(2) button"
        tools.click(driver)
        assert _order(tools, "nodes")[0] == "gpu-3"  # 570.195.03 before 580.159.04
        tools.click("#outliers th:nth-child(7) button")  # ratio, ascending
        ratios = tools.evaluate(
            "Array.from(document.querySelectorAll('#outliers tbody tr td:nth-child(7)')).map(c => +c.dataset.sort)"
        )
        assert ratios == sorted(ratios) and len(ratios) == 2
        assert tools.problems() == []


@pytest.mark.browser
def test_a_hostile_report_runs_nothing_and_the_page_fetches_nothing(tmp_path: Path, browser_binary: str) -> None:
    folder = fleet_dir(tmp_path, {**usual_changes(), "gpu-7": hostile})
    path = tmp_path / "fleet.html"
    path.write_text(render_fleet(fleet_of(folder), "html"))
    with chromium.DevTools(browser_binary, tmp_path / "profile") as tools:
        tools.open(path.as_uri())
        assert tools.evaluate("typeof window.pwned") == "undefined"
        assert tools.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
        assert tools.evaluate("document.scripts.length") == 1
        shown = tools.evaluate(
            "Array.from(document.querySelectorAll('#nodes tbody tr'))"
            f".find(r => r.dataset.host === {json.dumps(HOSTILE)}).cells[0].firstChild.data"
        )
        assert shown == HOSTILE
        tools.click("#nodes th:nth-child(1) button")  # the script still works on such a page
        assert len(_order(tools, "nodes")) == 12
        assert tools.requests() == [path.as_uri()]
        assert tools.problems() == []


def test_page_size_grows_with_the_nodes_not_with_their_gpus(tmp_path: Path) -> None:
    """The charts are histograms: a fleet of many GPUs adds table rows, not a mark per GPU."""
    folder = fleet_dir(tmp_path, usual_changes())
    small = render_fleet(fleet_of(folder), "html")
    for i in range(13, 61):
        report = copy.deepcopy(scaled(base_report(host=f"gpu-{i}", gpus=8), WOBBLE[i % len(WOBBLE)]))
        write(folder / f"gpu-{i}.json", report)
    big = render_fleet(fleet_of(folder), "html")
    assert big.count("<circle") == small.count("<circle") == 2
    assert big.count("<path") == small.count("<path")
    assert len(big) < len(small) * 60 / 12  # per node: a table row, about 700 bytes


def test_the_histogram_counts_every_figure_in_one_bar() -> None:
    scale = page._Scale(0.5, 1.5)
    figures = tuple(sorted([100.0] * 50 + [95.0, 10.0, 400.0]))  # 0.1× and 4× lie beyond the axis
    (bars,) = Page(page._bars(figures, 100.0, 40.0, scale)).find("path")
    starts = [float(m.group(1)) for m in re.finditer(r"M([\d.]+) ", bars["attrs"]["d"])]
    assert len(starts) == 4  # the two beyond the axis at its ends, 0.95×, and the fifty at 1×
    assert starts[0] == page._LEFT and starts[-1] > scale.at(1.5) - 10

"""One self-contained HTML page for ``fleet --format html``, with sortable tables and SVG charts.
Nothing is fetched: the Content-Security-Policy allows only the inline style and script.  Every
string from a report is hostile input: it goes into the page only through ``_el`` and ``_attrs``."""

from __future__ import annotations

import base64
import bisect
import hashlib
import html
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple

from cuda_doctor import __version__
from cuda_doctor.compare.fleet import CONFIG_LABELS, Fleet, GroupStats, Node, NodeConfig, NodeDifference, Outlier
from cuda_doctor.compare.keys import METRICS
from cuda_doctor.report import count, printable
from cuda_doctor.report.compare import wording

_NODE_FIELDS = ("driver", "cuda_driver", "torch", "torch_cuda", "nccl")
#: The charts' geometry, in SVG units.
_WIDTH = 760
_LEFT = 200  # the figure's label
_RIGHT = 20
_ROW = 46
_TOP = 22
_BINS = 120
#: The ratio axis always shows at least this much around the median (1×).
_MIN_SPAN = (0.5, 1.5)
#: ... and at most this much: a figure beyond is drawn at the edge (its mark says its value).
_MAX_SPAN = (0.0, 3.0)
_Rows = list[tuple[GroupStats, tuple[float, ...]]]  # a chart's: each figure's statistics and sorted values


class Html(str):
    """Markup made here, from escaped text: inserted as it is."""


def _esc(value: object) -> str:
    # printable first: a control character (a bidi override, NUL) is shown as its escape
    return html.escape(printable(value), quote=True)


def _attrs(attrs: dict[str, object]) -> str:
    # names are this module's constants; values are escaped whatever they hold
    return "".join(f' {name.rstrip("_").replace("_", "-")}="{_esc(v)}"' for name, v in attrs.items() if v is not None)


def _el(tag: str, *children: object, **attrs: object) -> Html:
    """``<tag attrs>children</tag>``: a child that is not ``Html`` is text, and is escaped."""
    inner = "".join(c if isinstance(c, Html) else _esc(c) for c in children if c is not None)
    return Html(f"<{tag}{_attrs(attrs)}>{inner}</{tag}>")


def _join(parts: Iterable[Html]) -> Html:
    return Html("".join(parts))


_CSS = """
:root{--fg:#1d232b;--muted:#5d6875;--line:#d9dee4;--bg:#fff;--soft:#f4f6f8;--warn:#fff1cc;
--warn-edge:#d99a00;--bad:#c62828;--bad-soft:#fde8e8;--fast:#1565c0;--ok:#2e7d32}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg)}
header{padding:18px 28px 12px;border-bottom:1px solid var(--line);background:var(--soft)}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
main{padding:0 28px 40px;max-width:1400px}
.verdict{font-weight:600}.verdict.uniform{color:var(--ok)}.verdict.findings{color:#8a5a00}
.meta{color:var(--muted);font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0 0;padding:0;list-style:none}
.cards li{border:1px solid var(--line);border-radius:6px;padding:6px 12px;background:var(--bg)}
.cards b{font-size:18px;display:block}
.cards .warn{border-color:var(--warn-edge);background:var(--warn)}
.cards .bad{border-color:var(--bad);background:var(--bad-soft)}
table{border-collapse:collapse;margin:4px 0 8px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600;white-space:nowrap}
thead th{position:sticky;top:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
#nodes td,#outliers td,#differing td{white-space:nowrap;padding:3px 10px}
th button{font:inherit;font-weight:600;border:0;background:none;padding:0;cursor:pointer;color:inherit}
th button::after{content:" \\2195";color:var(--muted);font-weight:400}
th[aria-sort=ascending] button::after{content:" \\2191";color:var(--fg)}
th[aria-sort=descending] button::after{content:" \\2193";color:var(--fg)}
tr.differs td{background:var(--warn)}
tr.differs td:first-child{box-shadow:inset 4px 0 var(--warn-edge)}
td.differs-cell{font-weight:700;color:#7a4b00}
tr.failing td:first-child{box-shadow:inset 4px 0 var(--bad)}
.failing-rules{color:var(--bad)}
.muted{color:var(--muted)}
.tag{display:inline-block;font-size:11px;border-radius:3px;padding:0 5px;margin-left:6px;border:1px solid}
.tag.differs{border-color:var(--warn-edge);color:#7a4b00}
.tag.failing{border-color:var(--bad);color:var(--bad)}
.tag.outlier{border-color:var(--bad);color:var(--bad)}
.scroll{max-height:70vh;overflow:auto;border:1px solid var(--line);display:inline-block;max-width:100%}
.scroll table{margin:0}
figure{margin:8px 0 18px}figcaption{font-weight:600;margin-bottom:2px}
svg{max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:var(--fg)}
svg .axis{stroke:var(--line)}svg .median{stroke:var(--fg);stroke-dasharray:3 2}
svg .bars{fill:#90a4ae}
svg .outlier.slow{fill:var(--bad)}svg .outlier.fast{fill:var(--fast)}
svg .sub{fill:var(--muted)}
.legend{color:var(--muted);font-size:12px}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin:0 3px 0 8px}
.dot.slow{background:var(--bad)}.dot.fast{background:var(--fast)}
"""

_JS = """
(function () {
  "use strict";
  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});
  function key(row, index, numeric) {
    var cell = row.cells[index];
    var text = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
    return numeric ? parseFloat(text) : text;
  }
  function compare(a, b, numeric) {
    if (!numeric) { return collator.compare(a, b); }
    if (isNaN(a) || isNaN(b)) { return isNaN(a) - isNaN(b); }
    return a - b;
  }
  function sortBy(th) {
    var table = th.closest("table");
    var numeric = th.getAttribute("data-type") === "number";
    var direction = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) {
      other.setAttribute("aria-sort", "none");
    });
    th.setAttribute("aria-sort", direction === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.map.call(body.rows, function (row, n) {
      return {row: row, key: key(row, th.cellIndex, numeric), n: n};
    });
    rows.sort(function (a, b) { return compare(a.key, b.key, numeric) * direction || a.n - b.n; });
    var ordered = document.createDocumentFragment();
    rows.forEach(function (r) { ordered.appendChild(r.row); });
    body.appendChild(ordered);
  }
  document.querySelectorAll("table.sortable th button").forEach(function (button) {
    button.addEventListener("click", function () { sortBy(button.parentNode); });
  });
})();
"""


def _csp_hash(block: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(block.encode()).digest()).decode() + "'"


#: Nothing but the two inline blocks below: no fetch, no other script, whatever a report holds.
_CSP = (
    f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; base-uri 'none'; form-action 'none'"
)


def render_fleet(fleet: Fleet, **_: Any) -> str:
    sections = (
        make(fleet) for make in (_majority, _differing, _failing, _charts, _outliers, _nodes, _unreadable, _notes)
    )
    title = f"cuda-doctor fleet: {count(len(fleet.nodes), 'node')}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(_CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{_el('title', title)}<style>{_CSS}</style></head>\n"
        f"<body>{_header(fleet)}<main>{_join(s for s in sections if s)}</main>"
        f"<script>{_JS}</script></body></html>\n"
    )


def _header(fleet: Fleet) -> Html:
    created = sorted(n.created for n in fleet.nodes if n.created)
    if not created:
        span = "reports without a creation time"
    else:
        span = f"reports created {created[0]}" + (f" … {created[-1]}" if created[-1] != created[0] else "")
    outlier_hosts = {o.path for o in fleet.outliers}
    cards = [  # (label, number, its look when not 0)
        ("nodes", len(fleet.nodes), None),
        ("like the majority", fleet.majority_count if fleet.majority else 0, None),
        ("differ", len(fleet.differing), "warn"),
        ("with failing rules", len(fleet.failing), "bad"),
        (f"outlier GPUs on {count(len(outlier_hosts), 'node')}", len(fleet.outliers), "bad"),
        ("unreadable", len(fleet.errors), "bad"),
    ]
    look = "verdict " + ("uniform" if fleet.uniform else "findings")
    verdict = _el("div", wording.fleet_verdict(fleet), class_=look, id="verdict")
    items = _join(_el("li", _el("b", n), label, class_=kind if n else None) for label, n, kind in cards)
    meta = f"{span} · outliers: median and MAD per GPU model and figure, noise band ±{fleet.noise:.0%}"
    meta_div = _el("div", f"{meta} · cuda-doctor {__version__}", class_="meta")
    return _el("header", _el("h1", "cuda-doctor fleet"), verdict, _el("ul", items, class_="cards"), meta_div)


def _section(
    heading: str, table_id: str, columns: list[str], rows: Iterable[Html], numeric: tuple[str, ...] = ()
) -> Html:
    """A heading and its table, sortable by any column (the ``numeric`` ones as numbers)."""
    head = _join(_column(name, name in numeric) for name in columns)
    table = _el("table", _el("thead", _el("tr", head)), _el("tbody", _join(rows)), id=table_id, class_="sortable")
    return _join([_el("h2", heading), _el("div", table, class_="scroll")])


def _column(name: str, numeric: bool) -> Html:
    number = {"data_type": "number", "class_": "num"} if numeric else {}
    return _el("th", _el("button", name, type="button"), scope="col", aria_sort="none", **number)


def _num(value: float | int | None, text: str | None = None) -> Html:
    shown = text if text is not None else ("—" if value is None else str(value))
    return _el("td", shown, class_="num", data_sort="" if value is None else repr(value))


def _node_line(kind: str, about: Node | NodeDifference | Outlier, *cells: Html) -> Html:
    """A row about one node: its name (its report's path on hover), then ``cells``."""
    return _el("tr", _el("td", about.host, title=about.path), *cells, class_=kind, data_host=about.host)


def _majority(fleet: Fleet) -> Html | None:
    if fleet.majority is None:
        return None
    tie = f" ({wording.tie_note(fleet)})" if fleet.majority_tied else ""
    rows = _join(
        _el("tr", _el("th", CONFIG_LABELS[key], scope="row"), _el("td", wording.config_value(value)))
        for key, value in vars(fleet.majority).items()
    )
    heading = f"Majority configuration: {fleet.majority_count} of {len(fleet.nodes)} nodes{tie}"
    return _join([_el("h2", heading), _el("table", _el("tbody", rows), id="majority")])


def _differing(fleet: Fleet) -> Html | None:
    if not fleet.differing:
        return None
    value = wording.config_value
    rows = []
    for d in fleet.differing:
        for f in d.differences:
            node_has = _el("td", value(f.value), class_="differs-cell")
            rows.append(_node_line("differs", d, _el("td", f.label), node_has, _el("td", value(f.majority))))
    heading = f"Nodes that differ from the majority ({len(fleet.differing)})"
    return _section(heading, "differing", ["node", "differs in", "node has", "majority has"], rows)


def _failing(fleet: Fleet) -> Html | None:
    failing = fleet.failing
    if not failing:
        return None
    rows = (
        _node_line("failing", n, _num(len(n.failing)), _el("td", ", ".join(n.failing), class_="failing-rules"))
        for n in failing
    )
    heading = f"Failing rules ({count(len(failing), 'node')})"
    return _section(heading, "failing", ["node", "failing", "rules (fail or error)"], rows, numeric=("failing",))


def _outliers(fleet: Fleet) -> Html | None:
    if not fleet.outliers:
        return None
    rows = (
        _node_line(
            f"outlier {o.direction}",
            o,
            _num(o.gpu),
            _el("td", o.gpu_model),
            _el("td", f"{o.label} ({o.unit})"),
            _num(o.value, f"{o.value:.4g}"),
            _num(o.median, f"{o.median:.4g}"),
            _num(o.ratio, wording.ratio(o.ratio)),
            _num(o.z, "—" if o.z is None else f"{o.z:+.1f}"),
            _el("td", o.direction, class_="failing-rules" if o.direction == "slow" else None),
        )
        for o in fleet.outliers
    )
    columns = ["node", "GPU", "model", "figure", "value", "median", "ratio", "robust z", "direction"]
    numeric = ("GPU", "value", "median", "ratio", "robust z")
    return _section(f"Performance outliers ({len(fleet.outliers)})", "outliers", columns, rows, numeric)


def _nodes(fleet: Fleet) -> Html:
    differing = {d.path: {f.field for f in d.differences} for d in fleet.differing}
    outliers = Counter(o.path for o in fleet.outliers)
    rows = (_node_row(n, differing.get(n.path), outliers[n.path], fleet.majority) for n in fleet.nodes)
    labels = [CONFIG_LABELS[f] for f in _NODE_FIELDS]
    columns = ["node", *labels, "GPUs", "failing rules", "warnings", "outlier figures"]
    return _section(f"Nodes ({len(fleet.nodes)})", "nodes", columns, rows, numeric=("warnings", "outlier figures"))


def _node_row(node: Node, differs: set[str] | None, outliers: int, majority: NodeConfig | None) -> Html:
    c = node.config
    flags = [name for name, on in (("differs", differs), ("failing", node.failing), ("outlier", outliers)) if on]
    tags = (_el("span", name, class_=f"tag {name}") for name in flags)
    cells = [_el("td", node.host, *tags, title=node.path, data_sort=node.host)]
    for field in _NODE_FIELDS:
        value = wording.config_value(getattr(c, field))
        if differs and field in differs and majority is not None:
            majority_value = wording.config_value(getattr(majority, field))
            cells.append(_el("td", value, class_="differs-cell", title=f"majority: {majority_value}"))
        else:
            cells.append(_el("td", value))
    gpus_differ = differs and ({"gpu_model", "gpu_count"} & differs)
    cells.append(_el("td", wording.gpus_text(c.gpu_count, c.gpu_model), class_="differs-cell" if gpus_differ else None))
    cells.append(_el("td", ", ".join(node.failing) or "—", class_="failing-rules" if node.failing else "muted"))
    cells += [_num(node.warnings), _num(outliers)]
    return _el("tr", *cells, class_=" ".join(flags) or None, data_host=node.host)


def _unreadable(fleet: Fleet) -> Html | None:
    if not fleet.errors:
        return None
    rows = (_el("tr", _el("td", e.path), _el("td", e.reason)) for e in fleet.errors)
    heading = f"Unreadable reports ({len(fleet.errors)}), left out of the comparison"
    return _section(heading, "unreadable", ["file", "problem"], rows)


def _notes(fleet: Fleet) -> Html | None:
    notes = wording.fleet_notes(fleet)
    if not notes:
        return None
    return _el("ul", _join(_el("li", n) for n in notes), class_="muted", id="notes")


def _charts(fleet: Fleet) -> Html | None:
    groups: dict[str, _Rows] = defaultdict(list)
    for stats, figures in zip(fleet.stats, fleet.figures, strict=True):
        groups[stats.gpu_model].append((stats, figures))
    if not groups:
        return None
    by_group: dict[tuple[str, str], list[Outlier]] = defaultdict(list)
    for o in fleet.outliers:
        by_group[(o.gpu_model, o.metric)].append(o)
    text = (
        "Each row: one smoke figure of every GPU of the model, as a ratio to its median (1×, dashed); "
        "bars count GPUs (log scale); outliers marked:"
    )
    dots = (_el("span", class_="dot slow"), "slow", _el("span", class_="dot fast"), "fast")
    legend = _el("p", text, *dots, ". Hover a mark for the node.", class_="legend")
    order = {m.key: i for i, m in enumerate(METRICS)}  # the figures in the order the smoke run lists them
    charts = (
        _chart(model, sorted(rows, key=lambda r: order.get(r[0].metric, len(order))), by_group)
        for model, rows in sorted(groups.items())
    )
    return _join([_el("h2", "Smoke figures per GPU model"), legend, *charts])


def _span(rows: _Rows) -> tuple[float, float]:
    low, high = _MIN_SPAN
    for stats, figures in rows:
        if stats.median > 0 and figures:
            low = min(low, figures[0] / stats.median)
            high = max(high, figures[-1] / stats.median)
    return max(low, _MAX_SPAN[0]), min(high, _MAX_SPAN[1])


def _chart(model: str, rows: _Rows, outliers: dict[tuple[str, str], list[Outlier]]) -> Html:
    x = _Scale(*_span(rows))
    height = _TOP + _ROW * len(rows) + 8
    parts = [_axis(x, height)]
    for index, (stats, figures) in enumerate(rows):
        parts.append(_row(stats, figures, outliers.get((stats.gpu_model, stats.metric), []), _TOP + _ROW * index, x))
    gpus = max(s.count for s, _ in rows)
    title = _el("title", f"{model}: smoke figures as ratios to the median")
    size = {"viewBox": f"0 0 {_WIDTH} {height}", "width": _WIDTH, "height": height}
    svg = _el("svg", title, *parts, **size, role="img", class_="chart", data_model=model)
    return _el("figure", _el("figcaption", f"{model} ({count(gpus, 'GPU')})"), svg)


class _Scale(NamedTuple):
    """The x axis: a ratio to the median in [low, high] → a position in the plot."""

    low: float
    high: float

    def at(self, ratio: float) -> float:
        clamped = min(max(ratio, self.low), self.high)
        return _LEFT + (_WIDTH - _LEFT - _RIGHT) * (clamped - self.low) / (self.high - self.low)


def _axis(x: _Scale, height: float) -> Html:
    ticks = [t for t in (0.25, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0) if x.low <= t <= x.high]
    parts = []
    for t in ticks:
        at = f"{x.at(t):.1f}"
        parts.append(_el("line", x1=at, x2=at, y1=_TOP - 6, y2=height - 6, class_="median" if t == 1.0 else "axis"))
        parts.append(_el("text", f"{t:g}×", x=at, y=12, text_anchor="middle"))
    return _join(parts)


def _row(stats: GroupStats, figures: tuple[float, ...], marks: list[Outlier], top: float, x: _Scale) -> Html:
    base = top + _ROW - 10  # the bars' baseline
    label = _el(
        "text",
        _el("tspan", f"{stats.label} ({stats.unit})", x=0, y=top + 16),
        _el("tspan", f"median {stats.median:.4g} · {count(stats.count, 'GPU')}", x=0, y=top + 30, class_="sub"),
    )
    parts = [label, _el("line", x1=_LEFT, x2=_WIDTH - _RIGHT, y1=base, y2=base, class_="axis")]
    if stats.median > 0 and figures:
        parts.append(_bars(figures, stats.median, base, x))
    for o in marks:
        at = x.at(o.ratio)
        tip = f"{o.host} GPU {o.gpu}: {wording.outlier_text(o)}"
        where = {"cx": f"{at:.1f}", "cy": f"{top + 8:.1f}", "r": 4.5}
        about = {"data_host": o.host, "data_gpu": o.gpu, "data_metric": o.metric}
        parts.append(_el("circle", _el("title", tip), **where, class_=f"outlier {o.direction}", **about))
    return _join(parts)


def _bars(figures: tuple[float, ...], median: float, base: float, x: _Scale) -> Html:
    """One path: a bar per bin of the x axis, as high as the log of the GPUs in it (a figure beyond the
    axis counts in the bin at its end); the figures are sorted, so a count is the gap between two bisections."""
    step = (x.high - x.low) / _BINS
    edges = [bisect.bisect_left(figures, median * (x.low + k * step)) for k in range(1, _BINS)]
    counts = [b - a for a, b in itertools.pairwise([0, *edges, len(figures)])]
    tallest = math.log1p(max(counts))
    width = (_WIDTH - _LEFT - _RIGHT) / _BINS
    bar = max(width - 0.6, 0.8)
    path = []
    for b, n in enumerate(counts):
        if n:
            h = max(1.5, (_ROW - 22) * math.log1p(n) / tallest)
            path.append(f"M{_LEFT + b * width:.1f} {base:.1f}h{bar:.1f}v{-h:.1f}h{-bar:.1f}z")
    return _el("path", d="".join(path), class_="bars")

"""``opconv verify --html F.html``: the verification as one self-contained page.

The page holds the run's settings, one row per output (the figures of the table ``verify`` prints and a
histogram of that output's element errors, drawn as inline SVG) and the bisect result.  It needs nothing but
itself: no script, no style sheet or font from elsewhere, so it can be attached to a CI run or mailed.

Machine-readable too: every figure cell carries its exact value in ``data-value``, every histogram bar its
bin's edges and count in ``data-lower``/``data-upper``/``data-count`` (the tests read them back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from lxml import etree, html

#: at most this many decades of error get a bar of their own; smaller errors share the first bar
MAX_DECADES = 14

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #176117; font-weight: bold; }
.differ { color: #a11; font-weight: bold; }
svg text { font: 10px sans-serif; fill: #444; }
"""


# ---------------------------------------------------------------------------
# the histogram of one output's errors
# ---------------------------------------------------------------------------


@dataclass
class HistogramBin:
    """Elements whose absolute error is in [lower, upper) (``label`` says it briefly)."""

    label: str
    lower: float  # 0 for the exact bin; NaN for the non-finite bin
    upper: float
    count: int


@dataclass
class ErrorHistogram:
    """Absolute errors |B - A| of one output's elements, by decade: exact ones, one bar per decade, and
    non-finite ones (NaN on one side only, or different infinities)."""

    bins: list[HistogramBin]
    total: int

    def to_json(self) -> dict:
        return {
            "total": self.total,
            "bins": [
                {"label": b.label, "lower": _json_float(b.lower), "upper": _json_float(b.upper), "count": b.count}
                for b in self.bins
            ],
        }


def error_histogram(expected: Any, actual: Any) -> ErrorHistogram | None:
    """The histogram of ``|actual - expected|``; None when the two are not numeric arrays of one shape."""
    if expected is None or actual is None or isinstance(expected, (list, tuple)) or isinstance(actual, (list, tuple)):
        return None
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype.kind not in "biufcV" or a.dtype.kind not in "biufcV":
        return None
    try:
        e, a = _as_float(e), _as_float(a)
    except (TypeError, ValueError):
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        same = (diff == 0) | (np.isnan(e) & np.isnan(a)) | (np.isinf(e) & (e == a))
    finite = np.isfinite(diff) & ~same
    bins = [HistogramBin("exact", 0.0, 0.0, int(same.sum()))]
    errors = diff[finite]
    if errors.size:
        exponents = np.floor(np.log10(errors)).astype(np.int64)
        top = int(exponents.max())
        low = max(int(exponents.min()), top - MAX_DECADES + 1)
        counts = np.bincount(np.clip(exponents, low, top) - low, minlength=top - low + 1)
        for k, count in zip(range(low, top + 1), counts):
            merged = k == low and int(exponents.min()) < low
            label = f"< 1e{k + 1}" if merged else f"1e{k}"
            bins.append(HistogramBin(label, 0.0 if merged else 10.0**k, 10.0 ** (k + 1), int(count)))
    bins.append(HistogramBin("non-finite", math.nan, math.nan, int(diff.size - same.sum() - errors.size)))
    return ErrorHistogram(bins, int(diff.size))


def _as_float(x: np.ndarray) -> np.ndarray:
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _json_float(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def histogram_svg(hist: ErrorHistogram, width: int = 380, height: int = 120):
    """The histogram as an ``<svg>`` element: one bar per bin, heights on a log scale of the counts (so a few
    large errors among a million exact elements still show), the count above each bar."""
    svg = etree.Element(
        "svg",
        xmlns="http://www.w3.org/2000/svg",
        width=str(width),
        height=str(height),
        viewBox=f"0 0 {width} {height}",
        role="img",
    )
    etree.SubElement(svg, "title").text = f"absolute error of {hist.total} elements, by decade"
    top, bottom = 14, height - 30
    slot = width / len(hist.bins)
    largest = max(b.count for b in hist.bins) or 1
    for i, b in enumerate(hist.bins):
        bar = (bottom - top) * math.log1p(b.count) / math.log1p(largest)
        x = i * slot + slot * 0.1
        colour = "#4a7" if b.label == "exact" else "#c44" if b.label == "non-finite" else "#47a"
        rect = etree.SubElement(
            svg,
            "rect",
            {
                "class": "bin",
                "x": f"{x:.1f}",
                "y": f"{bottom - bar:.1f}",
                "width": f"{slot * 0.8:.1f}",
                "height": f"{bar:.1f}",
                "fill": colour,
                "data-label": b.label,
                "data-lower": repr(b.lower),
                "data-upper": repr(b.upper),
                "data-count": str(b.count),
            },
        )
        etree.SubElement(rect, "title").text = f"{b.label}: {b.count} of {hist.total}"
        centre = f"{i * slot + slot / 2:.1f}"
        _svg_text(svg, centre, f"{bottom - bar - 3:.1f}", str(b.count))
        _svg_text(svg, centre, str(height - 16), b.label)
    etree.SubElement(svg, "line", x1="0", y1=str(bottom), x2=str(width), y2=str(bottom), stroke="#888")
    return svg


def _svg_text(svg, x: str, y: str, text: str) -> None:
    etree.SubElement(svg, "text", x=x, y=y, **{"text-anchor": "middle"}).text = text


# ---------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------

#: figures of OutputComparison.to_json() in the outputs table, in this order (those a report has); any other
#: number it holds follows them
_OUTPUT_COLUMNS = tuple(
    f"{stat}_{kind}_error" for kind in ("abs", "rel") for stat in ("max", "mean", "median", "p99")
) + ("mismatches", "total", "rtol", "atol")

#: report keys shown elsewhere on the page, or not settings
_NOT_SETTINGS = {"outputs", "first_divergence", "bisect", "summary", "ok"}


def render(report) -> str:
    """The page of a :class:`opconv.VerifyReport` (its ``histograms`` and ``bisect`` when it has them)."""
    data = report.to_json()
    page = etree.Element("html", lang="en")
    head = etree.SubElement(page, "head")
    etree.SubElement(head, "meta", charset="utf-8")
    etree.SubElement(head, "title").text = f"opconv verify: {report.summary()}"
    etree.SubElement(head, "style").text = _STYLE
    body = etree.SubElement(page, "body")
    etree.SubElement(body, "h1").text = "opconv verify"
    status = etree.SubElement(body, "p", id="summary", **{"class": "ok" if report.ok else "differ"})
    status.text = report.summary()

    etree.SubElement(body, "h2").text = "Outputs"
    body.append(_outputs_table(data["outputs"], getattr(report, "histograms", {}) or {}))
    etree.SubElement(body, "h2").text = "First divergence"
    body.append(_bisect_section(report))
    etree.SubElement(body, "h2").text = "Settings"
    body.append(_settings_table({k: v for k, v in data.items() if k not in _NOT_SETTINGS}))
    return html.tostring(page, doctype="<!DOCTYPE html>", encoding="unicode", pretty_print=True)


def _outputs_table(outputs: list[dict], histograms: dict):
    first = outputs[0] if outputs else {}
    figures = [k for k in _OUTPUT_COLUMNS if k in first] + [
        k
        for k in first
        if k not in _OUTPUT_COLUMNS
        and _is_figure(first[k])
        and k not in ("first_mismatch", "expected_value", "actual_value")
    ]
    columns = ["output", "status", "A", "B", *(k.replace("_", " ") for k in figures), "message", "errors |B - A|"]
    table = etree.Element("table", id="outputs")
    _row(table, "th", columns)
    for o in outputs:
        tr = etree.SubElement(table, "tr", {"class": "output", "data-name": o["name"]})
        _cell(tr, o["name"], "name")
        _cell(tr, "ok" if o["ok"] else "DIFFER", "status ok" if o["ok"] else "status differ")
        _cell(tr, _type_text(o["expected_dtype"], o["expected_shape"]), "a-type")
        _cell(tr, _type_text(o["actual_dtype"], o["actual_shape"]), "b-type")
        for key in figures:
            _figure_cell(tr, key, o.get(key))
        _cell(tr, o.get("message") or "-", "message")  # where the first mismatch is, with A's and B's values
        hist = histograms.get(o["name"])
        td = etree.SubElement(tr, "td", {"class": "histogram"})
        if hist is None:
            td.text = "-"
        else:
            td.append(histogram_svg(hist))
    return table


def _bisect_section(report):
    section = etree.Element("div", id="bisect")
    result = getattr(report, "bisect", None)
    if result is None:
        why = [note for note in report.notes if note.startswith("bisect")]
        etree.SubElement(section, "p").text = (
            "not run: every output is equal"
            if report.ok
            else why[0]
            if why
            else "not run (opconv verify --bisect runs it)"
        )
        return section
    etree.SubElement(section, "p", {"class": "summary"}).text = result.summary()
    if result.divergence is not None:
        section.append(_settings_table(result.divergence.to_json(), table_id="first-divergence"))
        if result.divergence.histogram is not None:
            etree.SubElement(section, "p").text = "errors |B - A| of the diverging value:"
            section.append(histogram_svg(result.divergence.histogram))
    section.append(_settings_table(result.to_json(), table_id="bisect-stats"))
    return section


def _settings_table(values: dict, table_id: str = "settings"):
    table = etree.Element("table", id=table_id)
    for key, value in values.items():
        tr = etree.SubElement(table, "tr", {"data-key": key})
        etree.SubElement(tr, "th").text = key
        if _is_figure(value):
            _figure_cell(tr, "value", value)
        else:
            _cell(tr, _plain_text(value), "value")
    return table


def _row(table, tag: str, cells: list[str]) -> None:
    tr = etree.SubElement(table, "tr")
    for text in cells:
        etree.SubElement(tr, tag).text = text


def _cell(tr, text: str, css: str) -> None:
    from .verification import xml_safe

    etree.SubElement(tr, "td", {"class": css}).text = xml_safe(text)


def _figure_cell(tr, key: str, value: Any) -> None:
    td = etree.SubElement(tr, "td", {"class": f"num {key}", "data-value": _exact(value)})
    td.text = "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _is_figure(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, (int, float)) and not isinstance(value, bool))
        or value in ("inf", "nan", "-inf")
    )


def _exact(value: Any) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def _type_text(dtype: str | None, shape: list | None) -> str:
    if dtype is None:
        return "-"
    return f"{dtype}[{','.join(map(str, shape or []))}]"


def _plain_text(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_plain_text(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain_text(v) for v in value) or "-"
    return "-" if value is None or value == "" else str(value)

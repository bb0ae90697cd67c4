"""``opconv verify --html``: one self-contained page whose table, histograms and bisect result carry the run's
numbers.  The models are built so that every element's error is known in advance (B adds a constant to A's
output, the input is zero), so the expected figures and histogram bins come from that constant, not from opconv.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from lxml import html
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.cli import cli
from opconv.html_report import error_histogram

#: B's output y = x + DELTA with x = 0, so |B - A| is |DELTA| (as float32) element by element
DELTA = np.array([0.0, 0.0, 2e-7, -3e-5, 5e-5, 0.2, -4.0, np.nan], np.float32)


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _pair(tmp_path):
    """A: y = Identity(x), z = Identity(x); B: y = x + DELTA, z = Identity(x); and an all-zero input file."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8]) for n in ("y", "z")]
    opset = [helper.make_opsetid("", 13)]
    a = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Identity", ["x"], ["y"], name="shift"),
                helper.make_node("Identity", ["x"], ["z"], name="copy"),
            ],
            "a",
            [x],
            outs,
        ),
        opset_imports=opset,
    )
    b = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Add", ["x", "delta"], ["y"], name="shift"),
                helper.make_node("Identity", ["x"], ["z"], name="copy"),
            ],
            "b",
            [x],
            outs,
            [numpy_helper.from_array(DELTA, "delta")],
        ),
        opset_imports=opset,
    )
    paths = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "in.npz"
    for model, path in zip((a, b), paths):
        path.write_bytes(model.SerializeToString())
    np.savez(paths[2], x=np.zeros(8, np.float32))
    return paths


def _page(path):
    return html.fromstring(path.read_bytes())


def _expected_bins(errors: np.ndarray) -> dict[str, int]:
    """Label -> count, by decade of each error, worked out element by element."""
    counts: dict[str, int] = {}
    for e in errors.astype(np.float64):
        label = "non-finite" if not math.isfinite(e) else "exact" if e == 0 else f"1e{math.floor(math.log10(e))}"
        counts[label] = counts.get(label, 0) + 1
    return counts


def test_the_page_holds_the_table_histograms_bisect_and_settings(tmp_path):
    a, b, inputs = _pair(tmp_path)
    page_path, json_path = tmp_path / "r.html", tmp_path / "r.json"
    result = run("verify", a, b, "--inputs", inputs, "--bisect", "--html", page_path, "--json", json_path)
    assert result.exit_code == 1, result.output
    page = _page(page_path)

    # self-contained: no script, nothing fetched from elsewhere
    assert not page.xpath("//script | //link | //iframe | //img | //object | //@src | //@href")
    assert not [v for v in page.xpath("//@*") if "http" in v and v != "http://www.w3.org/2000/svg"]
    assert page.xpath("//style") and "differ" in page.xpath("string(//p[@id='summary'])")

    rows = {tr.get("data-name"): tr for tr in page.xpath("//table[@id='outputs']/tr[@class='output']")}
    assert list(rows) == ["y", "z"]
    errors = np.abs(DELTA.astype(np.float64))  # A's y is 0
    y, z = rows["y"], rows["z"]
    figure = lambda row, key: row.xpath(f"string(td[contains(@class, '{key}')]/@data-value)")  # noqa: E731
    assert float(figure(y, "max_abs_error")) == float(np.nanmax(errors)) == 4.0
    assert int(figure(y, "mismatches")) == 3  # 0.2, 4 and NaN exceed 1e-4 + 1e-3 * 0; 2e-7, 3e-5, 5e-5 do not
    assert int(figure(y, "total")) == 8 and figure(y, "rtol") == "0.001" and figure(y, "atol") == "0.0001"
    assert y.xpath("string(td[contains(@class, 'status')])") == "DIFFER"
    assert z.xpath("string(td[contains(@class, 'status')])") == "ok" and float(figure(z, "max_abs_error")) == 0

    bars = {r.get("data-label"): int(r.get("data-count")) for r in y.xpath(".//svg//rect[@class='bin']")}
    assert {k: v for k, v in bars.items() if v} == _expected_bins(errors)
    assert sum(bars.values()) == 8
    assert list(bars) == ["exact", *(f"1e{k}" for k in range(-7, 1)), "non-finite"]  # every decade between
    [rect] = y.xpath(".//svg//rect[@data-label='1e-5']")
    assert (float(rect.get("data-lower")), float(rect.get("data-upper"))) == (1e-5, 1e-4)
    z_bars = {r.get("data-label"): int(r.get("data-count")) for r in z.xpath(".//svg//rect[@class='bin']")}
    assert z_bars == {"exact": 8, "non-finite": 0}

    first = {tr.get("data-key"): tr.xpath("string(td)") for tr in page.xpath("//table[@id='first-divergence']/tr")}
    assert first["node"] == "shift" and first["op"] == "Identity" and first["b_op"] == "Add"
    assert first["output"] == "y" and first["mismatches"] == "3"
    divergence_bars = page.xpath("//div[@id='bisect']/svg//rect[@class='bin']")
    assert {r.get("data-label"): int(r.get("data-count")) for r in divergence_bars} == bars
    assert json.loads(json_path.read_text())["first_divergence"]["node"] == "shift"

    settings = {tr.get("data-key"): tr.xpath("string(td)") for tr in page.xpath("//table[@id='settings']/tr")}
    assert settings["model_a"] == str(a) and settings["model_b"] == str(b)
    assert settings["seed"] == "0" and settings["random_inputs"] == "False" and "x: shape: 8" in settings["inputs"]


def test_a_real_conversion_with_a_perturbed_weight(fixtures_dir, tmp_path):
    """The cnn and its IR with one weight changed: the page's histogram counts every output element and its
    max error is the table's; the bisect section names conv2."""
    xml = tmp_path / "cnn.xml"
    cnn = f"{fixtures_dir}/cnn.onnx"
    assert run("onnx-to-ir", cnn, "--input-shape", "image=1,3,32,32", "-o", xml).exit_code == 0
    model = opconv.load(xml)
    value = model.graph.initializers["conv2.w"]
    w = np.array(value.const.numpy())
    w.flat[0] += 1.0
    value.const = opconv.Tensor.from_array(w, name="conv2.w")
    opconv.save(model, tmp_path / "bad.xml")

    page_path = tmp_path / "r.html"
    assert run("verify", cnn, tmp_path / "bad.xml", "--bisect", "--html", page_path).exit_code == 1
    page = _page(page_path)
    [row] = page.xpath("//table[@id='outputs']/tr[@class='output']")
    counts = [int(c) for c in row.xpath(".//rect/@data-count")]
    assert sum(counts) == int(row.xpath("string(td[contains(@class, 'total')]/@data-value)")) == 10
    top = max(
        float(r.get("data-upper"))
        for r in row.xpath(".//rect[@data-count!='0']")
        if r.get("data-label") not in ("exact", "non-finite")
    )
    max_abs = float(row.xpath("string(td[contains(@class, 'max_abs_error')]/@data-value)"))
    assert top / 10 <= max_abs < top
    node = page.xpath("string(//table[@id='first-divergence']/tr[@data-key='node']/td)")
    assert node == "conv2"
    total = page.xpath("string(//table[@id='first-divergence']/tr[@data-key='total']/td)")
    assert sum(int(c) for c in page.xpath("//div[@id='bisect']/svg//rect/@data-count")) == int(total) == 16 * 8 * 8


def test_without_bisect_the_page_says_it_was_not_run(tmp_path):
    a, b, inputs = _pair(tmp_path)
    page_path = tmp_path / "r.html"
    assert run("verify", a, a, "--inputs", inputs, "--html", page_path).exit_code == 0
    assert "every output is equal" in _page(page_path).xpath("string(//div[@id='bisect'])")
    assert run("verify", a, b, "--inputs", inputs, "--html", page_path).exit_code == 1
    assert "--bisect" in _page(page_path).xpath("string(//div[@id='bisect'])")


@pytest.mark.parametrize(
    "expected, actual, bins",
    [
        (np.zeros(3, np.int64), np.array([0, 5, 300]), {"exact": 1, "1e0": 1, "1e1": 0, "1e2": 1, "non-finite": 0}),
        (np.array([np.inf, np.nan]), np.array([np.inf, np.nan]), {"exact": 2, "non-finite": 0}),
        (np.array([np.inf, 1.0]), np.array([-np.inf, 1.0]), {"exact": 1, "non-finite": 1}),
    ],
)
def test_histogram_bins_of_integers_and_special_values(expected, actual, bins):
    hist = error_histogram(expected, actual)
    assert {b.label: b.count for b in hist.bins} == bins and hist.total == expected.size


def test_errors_over_many_decades_share_the_first_bar():
    errors = np.array([10.0**k for k in range(-30, 1)])
    hist = error_histogram(np.zeros_like(errors), errors)
    decades = [b for b in hist.bins if b.label not in ("exact", "non-finite")]
    assert len(decades) == 14 and decades[0].label == "< 1e-12" and decades[0].count == 31 - 13
    assert error_histogram(np.zeros(2), np.zeros(3)) is None and error_histogram(["a"], ["b"]) is None

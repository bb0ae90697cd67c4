"""``opconv.verify`` and ``opconv verify``: pairing, random inputs, comparison figures, reports, exit codes.

The figures of a perturbed model are checked against onnxruntime run on the
same inputs, so the report's first mismatching index and maximum error are
those of an independent runtime, not of opconv checking itself.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from lxml import etree
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.cli import cli
from opconv.compare import tolerance
from opconv.ir import Tensor
from opconv.verification import random_inputs
from tests.runtimes import run_ort


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def mlp(fixtures_dir):
    return os.path.join(fixtures_dir, "mlp_external.onnx")


@pytest.fixture
def resaved(mlp, tmp_path):
    path = tmp_path / "copy.onnx"
    opconv.save(opconv.load(mlp), path)
    return path


@pytest.fixture
def perturbed(mlp, tmp_path):
    """The MLP with fc1.w[3, 5] increased by 1.0."""
    model = opconv.load(mlp)
    value = model.graph.initializers["fc1.w"]
    w = np.array(value.const.numpy())
    w[3, 5] += 1.0
    value.const = Tensor.from_array(w, name="fc1.w")
    path = tmp_path / "perturbed.onnx"
    opconv.save(model, path)
    return path


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _identity(in_name="x", out_name="y", shape=("batch", 3)):
    return _model(
        [helper.make_node("Identity", [in_name], [out_name])],
        [helper.make_tensor_value_info(in_name, TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, shape)],
    )


# ---------------------------------------------------------------------------
# equal, different, unreadable
# ---------------------------------------------------------------------------


def test_a_resaved_model_verifies_equal(mlp, resaved):
    report = opconv.verify(mlp, resaved)
    assert report.ok and report.input_matching == "name" and report.seed == 0
    [out] = report.outputs
    assert out.name == "y" and out.ok and out.mismatches == 0 and out.max_abs_error == 0.0
    assert report.random_inputs and report.inputs["x"]["dtype"] == "float32"

    result = run("verify", mlp, resaved)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "verify: 1 outputs equal"


def test_a_perturbed_weight_is_found_where_onnxruntime_sees_it(mlp, perturbed):
    report = opconv.verify(mlp, perturbed, seed=3, input_shapes={"x": (4, 64)})  # one row may not reach fc1.w[3, 5]
    assert not report.ok
    [out] = report.outputs
    assert out.name == "y" and not out.ok

    # The same inputs through onnxruntime: the index of the first difference and the largest one.
    feeds = random_inputs(mlp, seed=3, input_shapes={"x": (4, 64)})
    expected = run_ort(onnx.load(mlp), feeds)[0]
    actual = run_ort(onnx.load(str(perturbed)), feeds)[0]
    rtol, atol = tolerance("float32")
    bad = np.abs(actual - expected) > atol + rtol * np.abs(expected)
    assert out.mismatches == int(bad.sum()) > 0
    assert out.first_mismatch == tuple(int(i) for i in np.argwhere(bad)[0])
    assert out.max_abs_error == pytest.approx(float(np.abs(actual - expected).max()), rel=1e-3)
    assert out.expected_value == pytest.approx(expected[out.first_mismatch], rel=1e-4)
    assert out.actual_value == pytest.approx(actual[out.first_mismatch], rel=1e-4)

    result = run("verify", mlp, perturbed, "--seed", 3, "--input-shape", "x=4,64")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[-1] == "verify: 1 of 1 outputs differ"
    row = next(line for line in lines if line.split()[:2] == ["FAIL", "y"])  # the verdict column first
    index = ",".join(map(str, out.first_mismatch))
    assert f"{out.mismatches}/{out.total}" in row and f"[{index}]:" in row and f"{out.max_abs_error:.3g}" in row


def test_explicit_tolerances_override_the_table(mlp, perturbed):
    assert opconv.verify(mlp, perturbed, atol=1e3).ok
    result = run("verify", mlp, perturbed, "--atol", "1000")
    assert result.exit_code == 0


def test_an_unreadable_model_exits_2(mlp, tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07not a protobuf at all")
    for other in (junk, tmp_path / "missing.onnx"):
        result = run("verify", mlp, other)
        assert result.exit_code == 2
        assert result.output.startswith("opconv: error:") and len(result.output.strip().splitlines()) == 1


def test_a_model_that_cannot_run_is_named(tmp_path):
    good = tmp_path / "good.onnx"
    onnx.save(_identity(), good)
    bad = _model(
        [helper.make_node("NoSuchOp", ["x"], ["y"], domain="example.domain")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    bad.opset_import.append(helper.make_opsetid("example.domain", 1))
    with pytest.raises(opconv.ExecutionError, match=r"^model B: .*NoSuchOp"):
        opconv.verify(good, bad)
    with pytest.raises(opconv.ExecutionError, match=r"^model A: "):
        opconv.verify(bad, good)
    onnx.save(bad, tmp_path / "bad.onnx")
    result = run("verify", tmp_path / "bad.onnx", good)
    assert result.exit_code == 2 and result.output.startswith(f"opconv: error: model A ({tmp_path / 'bad.onnx'}): ")


# ---------------------------------------------------------------------------
# reports
# ---------------------------------------------------------------------------


def test_json_report(mlp, perturbed, tmp_path):
    path = tmp_path / "report.json"
    assert run("verify", mlp, perturbed, "--json", path, "--input-shape", "x=4,64").exit_code == 1
    report = json.loads(path.read_text())
    assert report["ok"] is False and report["summary"] == "verify: 1 of 1 outputs differ"
    assert report["input_matching"] == "name" and report["seed"] == 0 and report["random_inputs"] is True
    assert report["inputs"]["x"]["dtype"] == "float32"
    [out] = report["outputs"]
    for key in (
        "name",
        "ok",
        "max_abs_error",
        "max_rel_error",
        "mismatches",
        "total",
        "first_mismatch",
        "expected_value",
        "actual_value",
        "rtol",
        "atol",
        "message",
    ):
        assert key in out
    assert out["name"] == "y" and out["mismatches"] > 0 and isinstance(out["expected_value"], float)


def test_junit_report_parses_with_the_standard_structure(mlp, perturbed, resaved, tmp_path):
    path = tmp_path / "report.xml"
    assert run("verify", mlp, perturbed, "--junit", path, "--input-shape", "x=4,64").exit_code == 1
    root = etree.parse(str(path)).getroot()
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "opconv.verify" and suite.get("tests") == "1" and suite.get("failures") == "1"
    [case] = suite.findall("testcase")
    assert case.get("name") == "y" and case.get("classname") == "opconv.verify"
    [failure] = case.findall("failure")
    assert "elements differ" in failure.get("message") and "first at" in failure.text

    ok = etree.fromstring(opconv.verify(mlp, resaved).to_junit().encode())
    assert ok.find("testsuite").get("failures") == "0" and ok.find("testsuite/testcase/failure") is None


def test_junit_escapes_names_and_messages(tmp_path):
    odd = 'y<&>"\x01'
    a = _model(
        [helper.make_node("Identity", ["x"], [odd])],
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info(odd, TensorProto.STRING, [2])],
    )
    b = _model(
        [
            helper.make_node(
                "Constant", [], [odd], value=helper.make_tensor("c", TensorProto.STRING, [2], [b"<&\x02>", b"]]>"])
            )
        ],
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info(odd, TensorProto.STRING, [2])],
    )
    report = opconv.verify(a, b)
    assert not report.ok
    root = etree.fromstring(report.to_junit().encode())
    case = root.find("testsuite/testcase")
    assert case.get("name") == 'y<&>"\\x01'
    assert "<&\\x02>" in case.find("failure").text


# ---------------------------------------------------------------------------
# pairing and inputs
# ---------------------------------------------------------------------------


def test_renamed_inputs_and_outputs_pair_by_position(tmp_path):
    report = opconv.verify(_identity("x", "y"), _identity("image", "probs"))
    assert report.ok and report.input_matching == "position" and report.output_matching == "position"
    assert any("'x'->'image'" in note for note in report.notes)
    assert any("'y'->'probs'" in note for note in report.notes)
    assert [o.name for o in report.outputs] == ["y"]

    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_identity("x", "y"), a)
    onnx.save(_identity("image", "probs"), b)
    result = run("verify", a, b)
    assert result.exit_code == 0 and "note: inputs matched by position" in result.output


def test_different_input_counts_are_an_error():
    two = _model(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["z"], ["w"])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "z")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("y", "w")],
    )
    with pytest.raises(opconv.OpconvError, match="different numbers of inputs: A has 1"):
        opconv.verify(_identity(shape=[2]), two)


def test_given_inputs_are_used_and_checked(mlp, resaved, tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    report = opconv.verify(mlp, resaved, {"x": x})
    assert report.ok and not report.random_inputs and report.inputs["x"] == {"shape": [2, 64], "dtype": "float32"}

    cases = {
        "dtype": ({"x": x.astype(np.float64)}, "input 'x' expects float32, got float64"),
        "shape": ({"x": x[:, :10]}, "input 'x' expects shape [batch,64], got [2, 10]"),
        "name": ({"image": x}, "unknown input(s) 'image'"),
    }
    for name, (inputs, message) in cases.items():
        with pytest.raises(opconv.ExecutionError, match="model A") as e:
            opconv.verify(mlp, resaved, inputs)
        assert message in str(e.value) and "\n" not in str(e.value), name
        path = tmp_path / f"{name}.npz"
        np.savez(path, **inputs)
        result = run("verify", mlp, resaved, "--inputs", path)
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1


def test_random_inputs_are_seeded_and_bind_symbols_consistently():
    model = _model(
        [helper.make_node("Identity", ["a"], ["c"]), helper.make_node("Identity", ["b"], ["d"])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 3, None]),
            helper.make_tensor_value_info("b", TensorProto.INT32, ["n"]),
        ],
        [
            helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("d", TensorProto.INT32, None),
        ],
    )
    first, again, other = (random_inputs(model, seed=s) for s in (5, 5, 6))
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not np.array_equal(first["a"], other["a"]) if first["a"].shape == other["a"].shape else True
    assert first["a"].shape[0] == first["b"].shape[0] and 1 <= first["a"].shape[0] <= 4
    assert first["a"].dtype == np.float32 and first["b"].dtype == np.int32 and (first["b"] != 0).all()

    fixed = random_inputs(model, input_shapes={"a": (7, 3, 2)})
    assert fixed["a"].shape == (7, 3, 2) and fixed["b"].shape == (7,)
    with pytest.raises(opconv.OpconvError, match="declares"):
        random_inputs(model, input_shapes={"a": (7, 4, 2)})


def test_random_indices_are_valid_for_what_they_index():
    data = numpy_helper.from_array(np.arange(35, dtype=np.float32).reshape(5, 7), "data")
    axes = numpy_helper.from_array(np.array([0], dtype=np.int64), "axes")
    model = _model(
        [
            helper.make_node("Gather", ["data", "rows"], ["g0"], axis=0),
            helper.make_node("Unsqueeze", ["cols", "axes"], ["cols1"]),
            helper.make_node("Gather", ["data", "cols1"], ["g1"], axis=-1),
            helper.make_node("GatherND", ["data", "nd"], ["g2"]),
            helper.make_node("GatherElements", ["table", "elems"], ["g3"], axis=1),
        ],
        [
            helper.make_tensor_value_info("rows", TensorProto.INT64, [200]),
            helper.make_tensor_value_info("cols", TensorProto.INT32, [200]),
            helper.make_tensor_value_info("nd", TensorProto.INT64, [100, 2]),
            helper.make_tensor_value_info("table", TensorProto.FLOAT, ["n", 3]),
            helper.make_tensor_value_info("elems", TensorProto.INT64, ["n", 50]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("g0", "g1", "g2", "g3")],
        [data, axes],
    )
    feeds = random_inputs(model, seed=1)
    assert feeds["rows"].min() >= 0 and feeds["rows"].max() == 4
    assert feeds["cols"].dtype == np.int32 and feeds["cols"].max() == 6
    assert feeds["nd"][:, 0].max() == 4 and feeds["nd"][:, 1].max() == 6 and feeds["nd"].min() == 0
    assert feeds["elems"].max() == 2
    assert opconv.verify(model, model).ok


def test_unlisted_input_shape_names_are_reported():
    with pytest.raises(opconv.OpconvError, match="unknown input.*'batch'"):
        random_inputs(_identity(), input_shapes={"batch": (2,)})

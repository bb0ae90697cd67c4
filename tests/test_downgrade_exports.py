"""Downgrading what exporters write: torch 2.13 dynamo exports (opset 20) and hand-built nodes of the same kinds.

The exports in ``fixtures/exports/`` (``scripts/make_dynamo_fixtures.py``) come with onnxruntime's outputs on
the original model; each downgraded model must pass onnx.checker (full) and give those outputs in onnxruntime,
or be refused naming a construct the target cannot express.  Hand-built cases compare onnxruntime on the
original and on the converted model.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.cli import cli
from opconv.converters.onnx_versions import convert_proto
from tests.runtimes import run_ort

EXPORTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "exports")
MODELS = ("block", "block_dyn", "gpt", "cnn_dyn", "det", "audio", "gru", "misc")

#: (model, target) -> the (op, version) pairs refused; a pair not listed must verify
REFUSED = {
    ("block", 7): {("Erf", 9)},  # Gelu's erf: no exact older form
    ("block_dyn", 9): {("Range", 11), ("Equal", 11)},  # the causal mask sized at run time; Equal on floats
    ("gpt", 9): {("Range", 11), ("Equal", 11)},
    ("cnn_dyn", 9): {("Resize", 11)},  # half_pixel bilinear: Resize-10/Upsample sample asymmetrically
    ("det", 9): {("Resize", 11), ("CumSum", 11)},
    ("audio", 7): {("Expand", 8), ("Where", 9)},
    ("misc", 9): {("CumSum", 11)},
}
TARGETS = (13, 11, 9, 7)


def load_export(name):
    model = onnx.load(os.path.join(EXPORTS, f"{name}.onnx"))
    data = np.load(os.path.join(EXPORTS, f"{name}.npz"))
    feeds = {k[3:]: data[k] for k in data.files if k.startswith("in:")}
    expected = [data[f"out:{o.name}"] for o in model.graph.output]
    return model, feeds, expected


def expected_refusals(name, target):
    found = set()
    for (model, at), ops in REFUSED.items():
        if model == name and target <= at:
            found |= ops
    return found


def check_target(proto: onnx.ModelProto, opset: int) -> None:
    onnx.checker.check_model(proto, full_check=True)
    assert [i.version for i in proto.opset_import if i.domain in ("", "ai.onnx")] == [opset]


@pytest.mark.parametrize("name", MODELS)
def test_dynamo_export_downgrades_or_names_what_cannot(name):
    model, feeds, expected = load_export(name)
    assert model.opset_import[0].version == 20
    for target in TARGETS:
        refused = expected_refusals(name, target)
        if target == 7 and (name, 9) in REFUSED:
            continue  # refused at 9 already: nothing new to learn at 7
        if refused:
            with pytest.raises(opconv.ConversionError) as info:
                convert_proto(model, target)
            assert {(p.op, p.version) for p in info.value.problems} <= refused | {
                ("Erf", 9),
                ("Where", 9),
                ("Expand", 8),
                ("Greater", 9),
            }
            assert {(p.op, p.version) for p in info.value.problems} >= refused
            continue
        converted = convert_proto(model, target)
        check_target(converted, target)
        for want, got in zip(expected, run_ort(converted, feeds)):
            assert got.dtype == want.dtype and got.shape == want.shape, f"{name} at {target}"
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} at opset {target}")


def test_refusals_are_grouped_by_reason(tmp_path):
    """Twelve nodes refused for one reason: one line with the count and the first names; every node stays
    in ``problems`` as structured data."""
    nodes = [helper.make_node("CumSum", ["x", "axis"], [f"c{i}"], name=f"sum{i}") for i in range(12)]
    nodes.append(helper.make_node("IsInf", ["x"], ["m"], name="inf"))
    outputs = [helper.make_tensor_value_info(f"c{i}", TensorProto.FLOAT, [2, 3]) for i in range(12)]
    outputs.append(helper.make_tensor_value_info("m", TensorProto.BOOL, [2, 3]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        outputs,
        initializer=[numpy_helper.from_array(np.array(1, np.int64), "axis")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(opconv.ConversionError) as info:
        convert_proto(model, 9)
    text = str(info.value)
    assert text.startswith("13 node(s) cannot be converted from opset 18 to 9: ")
    assert (
        "CumSum-11 -> 9: CumSum exists from opset 11 and no decomposition into older operators is defined "
        "(needs opset >= 11) (12 nodes: sum0, sum1, sum2, sum3, sum4, ...)"
    ) in text
    assert text.count("CumSum exists") == 1 and "IsInf-10 -> 9: IsInf exists from opset 10" in text
    assert text.endswith("(needs opset >= 10) (node: inf)")
    problems = info.value.problems
    assert [p.node for p in problems if p.op == "CumSum"] == [f"sum{i}" for i in range(12)]
    assert all(p.domain == "" and "CumSum exists from opset 11" in p.reason for p in problems if p.op == "CumSum")
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = CliRunner().invoke(cli, ["downgrade", "--opset", "9", str(path), "-o", str(tmp_path / "out.onnx")])
    assert result.exit_code == 2 and len(result.output) < 600 and result.output.count("\n") == 1


# -- hand-built nodes, onnxruntime on both sides -----------------------------------------------------


def _model(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _same_in_ort(model, target, feeds):
    converted = convert_proto(model, target)
    check_target(converted, target)
    for want, got in zip(run_ort(model, feeds), run_ort(converted, feeds)):
        np.testing.assert_array_equal(got, want)
    return converted


def _ops(proto):
    return [n.op_type for n in proto.graph.node]


def _refusal(model, target) -> str:
    with pytest.raises(opconv.ConversionError) as info:
        convert_proto(model, target)
    return str(info.value)


X = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)


def test_reshape_allowzero_dropped_only_where_exact():
    # a constant shape holding 0 and -1: invalid with allowzero=1 (onnxruntime fails on it too)
    shape = numpy_helper.from_array(np.array([3, 0, -1], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1, name="r")]
    text = _refusal(
        _model(
            nodes,
            [_info("x", TensorProto.FLOAT, ["a", 3, 4])],
            [_info("y", TensorProto.FLOAT, [3, 0, "n"])],
            18,
            [shape],
        ),
        13,
    )
    assert "Reshape-14 -> 13: allowzero=1 with both 0 and -1 in the shape [3, 0, -1] is invalid" in text
    # a constant shape holding 0 only: Reshape-14 gives that empty tensor (or fails), whatever the data
    empty = numpy_helper.from_array(np.array([3, 0, 5], np.int64), "shape")
    model = _model(
        nodes, [_info("x", TensorProto.FLOAT, ["a", 3, 4])], [_info("y", TensorProto.FLOAT, [3, 0, 5])], 18, [empty]
    )
    down = _same_in_ort(model, 13, {"x": np.zeros((0, 3, 4), np.float32)})
    assert run_ort(down, {"x": np.zeros((0, 3, 4), np.float32)})[0].shape == (3, 0, 5)
    # a run-time shape, with dims of the input not known to be non-zero: If(a 0 in the shape) decides
    dynamic = [helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1, name="r")]
    model = _model(
        dynamic,
        [_info("x", TensorProto.FLOAT, ["a", 3, 4]), _info("s", TensorProto.INT64, [2])],
        [_info("y", TensorProto.FLOAT, ["p", "q"])],
        18,
    )
    for target in (13, 11, 8):  # at 8 the empty branch is Expand (ConstantOfShape is from 9)
        for x, s in ((X, [4, 6]), (X, [-1, 3]), (X[:0], [5, 0]), (X[:0], [0, 12]), (X[:0], [0, 0])):
            down = _same_in_ort(model, target, {"x": x, "s": np.array(s, np.int64)})
        assert _ops(down) == ["ReduceProd", "Equal", "If"]
    # Reshape-13 alone would copy the input's 3 where the shape says 0: it fails where 14 gives (5, 0)
    (bare := onnx.ModelProto()).CopyFrom(down)
    bare.graph.node[2].CopyFrom(helper.make_node("Reshape", ["x", "s"], ["y"]))
    with pytest.raises(Exception, match="cannot be reshaped"):
        run_ort(bare, {"x": X[:0], "s": np.array([5, 0], np.int64)})
    # the same with the input's dims known to be non-zero: exact
    feeds = {"x": X, "s": np.array([4, 6], np.int64)}
    down = _same_in_ort(
        _model(
            dynamic,
            [_info("x", TensorProto.FLOAT, [2, 3, 4]), _info("s", TensorProto.INT64, [2])],
            [_info("y", TensorProto.FLOAT, ["p", "q"])],
            18,
        ),
        13,
        feeds,
    )
    assert not down.graph.node[0].attribute
    # each output dim the input's own at the same place (symbols included): a 0 there is copied alike
    sym = [helper.make_node("Shape", ["x"], ["dims"]), helper.make_node("Reshape", ["x", "dims"], ["y"], allowzero=1)]
    _same_in_ort(
        _model(sym, [_info("x", TensorProto.FLOAT, ["a", "b", 4])], [_info("y", TensorProto.FLOAT, ["a", "b", 4])], 18),
        13,
        {"x": X},
    )


def test_reshape_allowzero_branches_read_their_own_node_operands():
    """Repeated layers convert once and are reused by the protobuf path: an If's branches must still read
    each node's own operands (a reuse renames the node's inputs, not those its subgraphs read)."""
    nodes = [
        helper.make_node("Reshape", [x, "s"], [y], allowzero=1, name=f"r{i}")
        for i, (x, y) in enumerate((("a", "p"), ("b", "q")))
    ]
    model = _model(
        nodes,
        [_info(n, TensorProto.FLOAT, ["n", 3, 4]) for n in "ab"] + [_info("s", TensorProto.INT64, [2])],
        [_info(n, TensorProto.FLOAT, ["u", "v"]) for n in "pq"],
        18,
    )
    feeds = {"a": X, "b": X * 2, "s": np.array([6, 4], np.int64)}
    down = _same_in_ort(model, 11, feeds)
    assert [[k.input[0] for k in n.attribute[1].g.node] for n in down.graph.node if n.op_type == "If"] == [["a"], ["b"]]


@pytest.mark.parametrize("start,end", [(1, None), (-2, None), (0, -1), (1, 2), (-10, 10)])
@pytest.mark.parametrize("target", [13, 9])
def test_shape_start_end_as_slice(start, end, target):
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    nodes = [helper.make_node("Shape", ["x"], ["y"], **attrs)]
    model = _model(nodes, [_info("x", TensorProto.FLOAT, ["a", 3, 4])], [_info("y", TensorProto.INT64, ["n"])], 19)
    down = _same_in_ort(model, target, {"x": X})
    assert _ops(down) == ["Shape", "Slice"]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family_any_axis_to_11_and_1(op, axis):
    x = np.round(X * 4) / 4  # ties for Hardmax (the first maximum wins)
    model = _model(
        [helper.make_node(op, ["x"], ["y"], axis=axis)],
        [_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [_info("y", TensorProto.FLOAT, [2, 3, 4])],
        13,
    )
    for target in (11, 7):
        converted = convert_proto(model, target)
        check_target(converted, target)
        np.testing.assert_allclose(run_ort(converted, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2])
def test_trilu_with_run_time_dims_and_k(upper, k):
    inputs = ["x"] if k is None else ["x", "k"]
    model = _model(
        [helper.make_node("Trilu", inputs, ["y"], upper=upper)],
        [_info("x", TensorProto.FLOAT, ["a", "r", "c"])] + ([] if k is None else [_info("k", TensorProto.INT64, [])]),
        [_info("y", TensorProto.FLOAT, ["a", "r", "c"])],
        14,
    )
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 3, 5)).astype(np.float32)}
    if k is not None:
        feeds["k"] = np.array(k, np.int64)
    down = _same_in_ort(model, 11, feeds)
    assert "Range" in _ops(down) and "Where" in _ops(down)
    assert "Range exists from opset 11" in _refusal(model, 10)


def test_constant_of_shape_and_expand_below_their_opsets():
    """ConstantOfShape with a constant shape (how onnx's light models hold their weights) becomes Expand at 8
    and a constant at 7."""
    value = numpy_helper.from_array(np.array([0.5], np.float32), "value")
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["w"], value=value),
        helper.make_node("Add", ["x", "w"], ["y"]),
    ]
    model = _model(
        nodes,
        [_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [_info("y", TensorProto.FLOAT, [2, 3, 4])],
        12,
        [numpy_helper.from_array(np.array([3, 1], np.int64), "shape")],
    )
    model.graph.node[1].input[1] = "w"
    assert "Expand" in _ops(_same_in_ort(model, 8, {"x": X}))
    assert _ops(_same_in_ort(model, 7, {"x": X})) == ["Add"]


def test_pool_dilations_of_one_dropped():
    for dilations, target in (([1, 1], 7), ([2, 1], 9)):
        model = _model(
            [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=dilations, name="pool")],
            [_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
            [_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
            12,
        )
        if dilations == [1, 1]:
            _same_in_ort(model, target, {"x": X.reshape(1, 2, 3, 4)})
        else:
            assert "dilations [2, 1] need MaxPool-10 or later" in _refusal(model, target)


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
def test_scatter_reductions_refused_where_the_older_version_has_none(op):
    def model(reduction):
        indices = [1, 1] if op == "ScatterND" else [1, 4]
        return _model(
            [helper.make_node(op, ["d", "i", "u"], ["y"], reduction=reduction, name="s")],
            [
                _info("d", TensorProto.FLOAT, [3, 4]),
                _info("i", TensorProto.INT64, indices),
                _info("u", TensorProto.FLOAT, [1, 4]),
            ],
            [_info("y", TensorProto.FLOAT, [3, 4])],
            18,
        )

    feeds = {
        "d": X.reshape(6, 4)[:3],
        "i": np.array([[2]] if op == "ScatterND" else [[0, 2, 1, 0]], np.int64),
        "u": np.ones((1, 4), np.float32),
    }
    _same_in_ort(model("none"), 13, feeds)
    _same_in_ort(model("add"), 16, feeds)
    assert f"reduction='max' needs {op}-18 or later" in _refusal(model("max"), 16)
    assert f"reduction='add' needs {op}-16 or later (before it, 'none' only)" in _refusal(model("add"), 13)


def test_split_num_outputs_uneven_with_known_dim():
    model = _model(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=2, num_outputs=2)],
        [_info("x", TensorProto.FLOAT, [2, 3, 5])],
        [_info("a", TensorProto.FLOAT, [2, 3, 3]), _info("b", TensorProto.FLOAT, [2, 3, 2])],
        18,
    )
    x = np.random.default_rng(2).standard_normal((2, 3, 5)).astype(np.float32)
    for target in (13, 11):
        _same_in_ort(model, target, {"x": x})


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_integer_max_min_below_12_as_where_chains(op):
    # Exporters take Max/Min of int64 shapes and positions; Max-8/Min-8 take floats only.
    model = _model(
        [helper.make_node(op, ["a", "b", "c"], ["y"])],
        [
            _info("a", TensorProto.INT64, [2, 3]),
            _info("b", TensorProto.INT64, [3]),
            _info("c", TensorProto.INT64, [2, 1]),
        ],
        [_info("y", TensorProto.INT64, [2, 3])],
        13,
    )
    rng = np.random.default_rng(5)
    feeds = {"a": rng.integers(-9, 9, (2, 3)), "b": rng.integers(-9, 9, (3,)), "c": rng.integers(-9, 9, (2, 1))}
    for target in (11, 9):
        _same_in_ort(model, target, feeds)
    assert "Greater-7 does not accept" in _refusal(model, 8) or "Less-7 does not accept" in _refusal(model, 8)


def test_softmax_on_the_last_axis_of_an_input_of_unknown_rank_to_11():
    # onnxruntime's optimizer leaves such inputs (after contrib ops inference cannot type); the last axis needs
    # no rank, from Softmax-11 on; below 11 the rank is still asked for.
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
        [_info("x", TensorProto.FLOAT, [6, 5]), _info("s", TensorProto.INT64, ["n"])],
        [_info("y", TensorProto.FLOAT, ["a", "b", "c"])],
        13,
    )
    x = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    _same_in_ort(model, 11, {"x": x, "s": np.array([2, 3, 5], np.int64)})
    assert "rank" in _refusal(model, 10)

"""ONNX Scan and Loop (static trip count) -> opset1 TensorIterator, and If -> its branches inlined (the taken one
when the condition is a constant, else both and a Select): the IR computes what onnxruntime computes, in OpenVINO's
CPU plugin and in opconv's IR executor; a Loop whose trip count is computed at run time, and an If whose branches
give different shapes on a run-time condition, are refused saying why."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import openvino as ov
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.compare import compare_arrays
from opconv.errors import ConversionError

F = TensorProto.FLOAT


def _info(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def _proto(nodes, inputs, outputs, inits, opset):
    graph = helper.make_graph(nodes, "control_flow", inputs, outputs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    return proto


def _scan_model():
    """A recurrent state h = tanh(h @ W + x_t) over x read backwards along axis 1; W comes from the outer scope.

    Two scan outputs: h stacked on axis 0 in reverse order, and 2h stacked on the last axis forwards.
    """
    rng = np.random.default_rng(7)
    w = rng.uniform(-0.8, 0.8, (3, 3)).astype(np.float32)
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["h_in", "W"], ["hw"]),
            helper.make_node("Add", ["hw", "x_t"], ["pre"]),
            helper.make_node("Tanh", ["pre"], ["h_out"]),
            helper.make_node("Identity", ["h_out"], ["h_seq"]),
            helper.make_node("Add", ["h_out", "h_out"], ["h_twice"]),
        ],
        "scan_body",
        [_info("h_in", [2, 3]), _info("x_t", [2, 3])],
        [_info("h_out", [2, 3]), _info("h_seq", [2, 3]), _info("h_twice", [2, 3])],
    )
    node = helper.make_node(
        "Scan",
        ["h0", "x"],
        ["h_last", "ys", "zs"],
        name="recurrence",
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[1],
        scan_input_directions=[1],
        scan_output_axes=[0, -1],
        scan_output_directions=[1, 0],
    )
    proto = _proto(
        [node],
        [_info("h0", [2, 3]), _info("x", [2, 5, 3])],
        [_info("h_last", [2, 3]), _info("ys", [5, 2, 3]), _info("zs", [2, 3, 5])],
        [numpy_helper.from_array(w, "W")],
        16,
    )
    feeds = {
        "h0": rng.standard_normal((2, 3)).astype(np.float32),
        "x": rng.standard_normal((2, 5, 3)).astype(np.float32),
    }
    return proto, feeds


def _loop_model(trip_count_input=False):
    """Four iterations of y = 0.5 y + table[i] + i (a carried value), stacking y * y; the condition stays true."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Gather", ["table", "i"], ["row"]),
            helper.make_node("Cast", ["i"], ["i_f"], to=F),
            helper.make_node("Mul", ["y_in", "half"], ["y_half"]),
            helper.make_node("Add", ["y_half", "row"], ["y_row"]),
            helper.make_node("Add", ["y_row", "i_f"], ["y_out"]),
            helper.make_node("Mul", ["y_out", "y_out"], ["y_sq"]),
        ],
        "loop_body",
        [_info("i", [], TensorProto.INT64), _info("cond_in", [], TensorProto.BOOL), _info("y_in", [3])],
        [_info("cond_out", [], TensorProto.BOOL), _info("y_out", [3]), _info("y_sq", [3])],
        [numpy_helper.from_array(np.float32(0.5), "half")],
    )
    node = helper.make_node("Loop", ["M", "", "y0"], ["y_last", "y_all"], name="accumulate", body=body)
    inits = [numpy_helper.from_array(table, "table")]
    inputs = [_info("y0", [3])]
    feeds = {"y0": np.array([1.0, -2.0, 0.5], np.float32)}
    if trip_count_input:
        inputs.append(_info("M", [], TensorProto.INT64))
        feeds["M"] = np.array(4, np.int64)
    else:
        inits.append(numpy_helper.from_array(np.array(4, np.int64), "M"))
    proto = _proto([node], inputs, [_info("y_last", [3]), _info("y_all", [4, 3])], inits, 13)
    return proto, feeds


def _scan8_model():
    """Opset-8 Scan (batch axis first, sequence_lens the full length): a running sum over a reversed input."""
    rng = np.random.default_rng(8)
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "a"], ["s_out"]), helper.make_node("Neg", ["b"], ["b_neg"])],
        "scan8_body",
        [_info("s", [2]), _info("a", [2]), _info("b", [3])],
        [_info("s_out", [2]), _info("b_neg", [3])],
    )
    node = helper.make_node(
        "Scan", ["lens", "s0", "A", "B"], ["s_last", "B_neg"], body=body, num_scan_inputs=2, directions=[1, 0]
    )
    proto = _proto(
        [node],
        [_info("s0", [1, 2]), _info("A", [1, 4, 2]), _info("B", [1, 4, 3])],
        [_info("s_last", [1, 2]), _info("B_neg", [1, 4, 3])],
        [numpy_helper.from_array(np.array([4], np.int64), "lens")],
        8,
    )
    feeds = {
        name: rng.standard_normal(shape).astype(np.float32)
        for name, shape in (("s0", (1, 2)), ("A", (1, 4, 2)), ("B", (1, 4, 3)))
    }
    return proto, feeds


def _loop_without_iteration_number_model():
    """A Loop whose body reads neither its iteration number nor a carried value, only an outer-scope value.

    OpenVINO drops body Parameters nothing reads; the iteration count must survive that.
    """
    body = helper.make_graph(
        [
            helper.make_node("Constant", [], ["keep_going"], value=numpy_helper.from_array(np.array(True))),
            helper.make_node("Relu", ["x"], ["r"]),
        ],
        "loop_body",
        [_info("i", [], TensorProto.INT64), _info("cond_in", [], TensorProto.BOOL)],
        [_info("keep_going", [], TensorProto.BOOL), _info("r", [2, 2])],
    )
    node = helper.make_node("Loop", ["M", "go"], ["rs"], body=body)
    inits = [numpy_helper.from_array(np.array(3, np.int64), "M"), numpy_helper.from_array(np.array(True), "go")]
    proto = _proto([node], [_info("x", [2, 2])], [_info("rs", [3, 2, 2])], inits, 13)
    return proto, {"x": np.array([[1.5, -2.0], [0.25, -0.5]], np.float32)}


def _close(expected, actual, who):
    # By position: IR v10 names a multi-output layer's outputs after the layer, not after the ONNX values.
    assert len(actual) == len(expected), who
    for (name, value), got in zip(expected.items(), actual):
        cmp = compare_arrays(name, value, np.asarray(got), rtol=1e-5, atol=1e-6)
        assert cmp.ok, f"{who}: {cmp.message}"


@pytest.mark.parametrize(
    "make",
    [_scan_model, _scan8_model, _loop_model, _loop_without_iteration_number_model],
    ids=["scan", "scan-opset8", "loop", "loop-without-iteration-number"],
)
def test_converted_iteration_matches_onnxruntime(tmp_path, make):
    proto, feeds = make()
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    converted = opconv.convert(opconv.load(proto), to="openvino")
    assert [n.op for n in converted.graph.nodes if n.op not in ("Constant", "Convert")] == ["TensorIterator"]
    xml = str(tmp_path / "iteration.xml")
    opconv.save(converted, xml)
    _close(expected, list(opconv.run(opconv.load(xml), feeds).values()), "opconv IR executor")
    core = ov.Core()
    compiled = core.compile_model(core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(feeds)
    _close(expected, [results[compiled.output(i)] for i in range(len(compiled.outputs))], "OpenVINO CPU")


def test_loop_with_trip_count_computed_at_run_time_is_refused():
    proto, _ = _loop_model(trip_count_input=True)
    with pytest.raises(ConversionError) as caught:
        opconv.convert(opconv.load(proto), to="openvino")
    message = str(caught.value)
    assert "'accumulate' (Loop)" in message and "trip count ('M') is computed at run time" in message


def test_loop_whose_condition_may_become_false_is_refused():
    proto, _ = _loop_model()
    body = proto.graph.node[0].attribute[0].g
    body.node[0].CopyFrom(helper.make_node("Less", ["i", "M"], ["cond_out"]))  # a while loop on the outer M
    refusal = r"'accumulate' \(Loop\).*condition output \('cond_out'\) may become false"
    with pytest.raises(ConversionError, match=refusal):
        opconv.convert(opconv.load(proto), to="openvino")


def _run_both(tmp_path, proto, feeds_list, input_shapes=None):
    """Convert once, then check each feed in OpenVINO (f32) and opconv's IR executor against onnxruntime."""
    converted = opconv.convert(opconv.load(proto), to="openvino", input_shapes=input_shapes)
    xml = str(tmp_path / "converted.xml")
    opconv.save(converted, xml)
    core = ov.Core()
    compiled = core.compile_model(core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        _close(expected, list(opconv.run(opconv.load(xml), feeds).values()), "opconv IR executor")
        results = compiled(feeds)
        _close(expected, [results[compiled.output(i)] for i in range(len(compiled.outputs))], "OpenVINO CPU")
    return converted


def _if_model(condition="computed", else_output=("Sub", [2, 3]), symbolic=False):
    """y, z = If(sum(x) > 0 | a constant | rows(x) > 2): then relu(x * w), x; else x - 1.5 (or another
    shape), x * w.  Each branch has its own constant and reads enclosing values (x, w)."""
    dims = ["rows", 3] if symbolic else [2, 3]
    then_branch = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["t_scaled"]),
            helper.make_node("Relu", ["t_scaled"], ["t"]),
            helper.make_node("Identity", ["x"], ["t_x"]),
        ],
        "then",
        [],
        [_info("t", dims), _info("t_x", dims)],
    )
    op, shape = else_output
    else_nodes = [
        helper.make_node("Sub", ["x", "k"], ["e"])
        if op == "Sub"
        else helper.make_node("ReduceSum", ["x"], ["e"], keepdims=1),
        helper.make_node("Mul", ["x", "w"], ["e_scaled"]),
    ]
    else_branch = helper.make_graph(
        else_nodes,
        "else",
        [],
        [_info("e", shape), _info("e_scaled", dims)],
        [numpy_helper.from_array(np.float32(1.5), "k")],
    )
    inits = [numpy_helper.from_array(np.full((2, 3) if not symbolic else (1, 3), 2.0, np.float32), "w")]
    if condition == "computed":
        nodes = [
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
        ]
        inits.append(numpy_helper.from_array(np.float32(0), "zero"))
    elif condition == "rows":  # a constant once the input's shape is fixed
        nodes = [
            helper.make_node("Shape", ["x"], ["dims"]),
            helper.make_node("Gather", ["dims", "first"], ["rows_count"], axis=0),
            helper.make_node("Greater", ["rows_count", "two"], ["c"]),
        ]
        inits += [numpy_helper.from_array(np.int64(0), "first"), numpy_helper.from_array(np.int64(2), "two")]
    else:
        nodes = []
        inits.append(numpy_helper.from_array(np.array(condition), "c"))
    nodes.append(
        helper.make_node("If", ["c"], ["y", "z"], name="choose", then_branch=then_branch, else_branch=else_branch)
    )
    return _proto(nodes, [_info("x", dims)], [_info("y", None), _info("z", None)], inits, 16)


def test_if_on_a_run_time_condition_selects_between_both_branches(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 1
    converted = _run_both(tmp_path, _if_model(), [{"x": x}, {"x": -x - 1}])
    ops = [n.op for n in converted.graph.nodes]
    assert "If" not in ops and ops.count("Select") == 2 and "ReLU" in ops and "Subtract" in ops


@pytest.mark.parametrize("condition", [True, False])
def test_if_on_a_constant_condition_keeps_only_the_taken_branch(tmp_path, condition):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    converted = _run_both(tmp_path, _if_model(condition, else_output=("ReduceSum", [1, 1])), [{"x": x}])
    ops = [n.op for n in converted.graph.nodes]
    assert "Select" not in ops and ("ReLU" in ops) == condition and ("ReduceSum" in ops) != condition


@pytest.mark.parametrize("rows", [2, 4])
def test_if_whose_condition_is_constant_once_shapes_are_fixed(tmp_path, rows):
    x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
    proto = _if_model("rows", else_output=("ReduceSum", [1, 1]), symbolic=True)
    converted = _run_both(tmp_path, proto, [{"x": x}], input_shapes={"x": (rows, 3)})
    ops = [n.op for n in converted.graph.nodes]
    assert "Select" not in ops and ("ReLU" in ops) == (rows > 2)


def test_if_whose_branches_differ_in_shape_is_refused_saying_where():
    with pytest.raises(ConversionError) as caught:
        opconv.convert(opconv.load(_if_model(else_output=("ReduceSum", [1, 1]))), to="openvino")
    assert (
        "node 'choose' (If): onnx->openvino:If: branch output 0 has shape [2, 3] in then_branch ('t') and "
        "[1, 1] in else_branch ('e')"
    ) in str(caught.value)


def _rows_loop_model(body_dims=None):
    """M = Shape(x)[0] iterations of y = y + i over x (rows symbolic), stacking y * y: M is folded to a constant
    once x's rows are given.  The body declares ``body_dims`` for y (none by default)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Cast", ["i"], ["i_f"], to=F),
            helper.make_node("Add", ["y_in", "i_f"], ["y_out"]),
            helper.make_node("Mul", ["y_out", "y_out"], ["y_sq"]),
        ],
        "loop_body",
        [_info("i", [], TensorProto.INT64), _info("cond_in", [], TensorProto.BOOL), _info("y_in", body_dims)],
        [_info("cond_out", [], TensorProto.BOOL), _info("y_out", body_dims), _info("y_sq", body_dims)],
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["dims"]),
        helper.make_node("Gather", ["dims", "first"], ["M"], axis=0),
        helper.make_node("Loop", ["M", "", "x"], ["y", "ys"], body=body, name="rows_loop"),
    ]
    proto = _proto(
        nodes,
        [_info("x", ["rows", 3])],
        [_info("y", ["rows", 3]), _info("ys", None)],
        [numpy_helper.from_array(np.int64(0), "first")],
        13,
    )
    return proto, {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)}


def test_loop_whose_trip_count_is_constant_once_shapes_are_fixed(tmp_path):
    proto, feeds = _rows_loop_model()
    converted = _run_both(tmp_path, proto, [feeds], input_shapes={"x": (4, 3)})
    # (a Convert to the same type gives a graph output of a multi-output layer its ONNX name in OpenVINO)
    assert [n.op for n in converted.graph.nodes if n.op != "Convert"] == ["TensorIterator"]


def test_taken_branch_folds_into_what_follows(tmp_path):
    """An If on the input's rows chooses a Reshape target: inlined before folding, the target is a constant, which
    opset1 Reshape needs (the branches' targets differ, so with a run-time condition it would be refused)."""

    def target(name, dims):
        return helper.make_graph(
            [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(dims, np.int64)))],
            name,
            [],
            [_info(name, [2], TensorProto.INT64)],
        )

    nodes = [
        helper.make_node("Shape", ["x"], ["dims"]),
        helper.make_node("Gather", ["dims", "first"], ["rows_count"], axis=0),
        helper.make_node("Greater", ["rows_count", "two"], ["c"]),
        helper.make_node(
            "If", ["c"], ["target"], then_branch=target("wide", [-1, 12]), else_branch=target("narrow", [-1, 2])
        ),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    proto = _proto(
        nodes,
        [_info("x", ["rows", 6])],
        [_info("y", None)],
        [numpy_helper.from_array(np.int64(0), "first"), numpy_helper.from_array(np.int64(2), "two")],
        16,
    )
    for rows in (2, 4):
        x = np.arange(rows * 6, dtype=np.float32).reshape(rows, 6)
        converted = _run_both(tmp_path, proto, [{"x": x}], input_shapes={"x": (rows, 6)})
        assert [n.op for n in converted.graph.nodes] == ["Reshape"]

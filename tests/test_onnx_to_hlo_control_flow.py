"""ONNX If and Loop -> HLO.  If: a constant condition (also once input shapes are fixed) inlines the taken branch;
a run-time one keeps both branches as an HLO If, which needs both to give one type, else a refusal saying which
output differs.  Loop: a While; scan outputs need a trip count known before the loop (constant, or folded once
shapes are fixed).  Checked against onnxruntime in opconv's HLO executor and, exported as StableHLO, in IREE."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import opconv
from opconv.compare import compare_arrays
from opconv.converters.onnx_to_hlo import onnx_to_hlo
from opconv.dialects.hlo.stablehlo import export_function
from opconv.errors import ConversionError
from tests.test_onnx_to_openvino_control_flow import (
    _if_model,
    _loop_model,
    _loop_without_iteration_number_model,
    _rows_loop_model,
)

iree_runtime = pytest.importorskip("tests.iree_runtime")


def _check(proto, feeds_list, input_shapes=None):
    hlo = onnx_to_hlo(opconv.load(proto), input_shapes=input_shapes)
    module = iree_runtime.IreeModule(export_function(hlo, "f"))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        expected = session.run(None, feeds)
        with np.errstate(all="ignore"):
            mine = list(opconv.run(hlo, feeds).values())
        iree = module.call("f", *[feeds[v.name] for v in hlo.graph.inputs])
        for who, got in (("opconv HLO executor", mine), ("IREE", iree)):
            assert len(got) == len(expected), who
            for k, (want, value) in enumerate(zip(expected, got)):
                cmp = compare_arrays(f"output {k}", want, np.asarray(value), rtol=1e-6, atol=1e-6)
                assert cmp.ok, f"{who}: {cmp.message}"
    return hlo


def test_if_on_a_run_time_condition_stays_an_hlo_if():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 1
    hlo = _check(_if_model(), [{"x": x}, {"x": -x - 1}])
    assert "If" in [n.op for n in hlo.graph.nodes]


@pytest.mark.parametrize("condition", [True, False])
def test_if_on_a_constant_condition_keeps_only_the_taken_branch(condition):
    """The branches give different shapes ([2, 3] and [1, 1]): only inlining can convert it."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    hlo = _check(_if_model(condition, else_output=("ReduceSum", [1, 1])), [{"x": x}])
    assert "If" not in [n.op for n in hlo.graph.walk()]


@pytest.mark.parametrize("rows", [2, 4])
def test_if_whose_condition_is_constant_once_shapes_are_fixed(rows):
    x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
    proto = _if_model("rows", else_output=("ReduceSum", [1, 1]), symbolic=True)
    hlo = _check(proto, [{"x": x}], input_shapes={"x": (rows, 3)})
    assert "If" not in [n.op for n in hlo.graph.walk()]


def test_if_whose_branches_differ_in_shape_is_refused_saying_where():
    with pytest.raises(ConversionError) as caught:
        onnx_to_hlo(opconv.load(_if_model(else_output=("ReduceSum", [1, 1]))))
    assert "branch output 0 has shape [2, 3] in then_branch ('t') and [1, 1] in else_branch ('e')" in str(caught.value)


@pytest.mark.parametrize(
    "make", [_loop_model, _loop_without_iteration_number_model], ids=["carried-and-scan-output", "scan-output-only"]
)
def test_loop_with_scan_outputs_and_a_constant_trip_count(make):
    """Scan outputs are carried as (M, ...) buffers written row by row: the count must be known."""
    proto, feeds = make()
    hlo = _check(proto, [feeds])
    assert [n.op for n in hlo.graph.nodes if n.op == "While"] == ["While"]


def test_loop_with_scan_outputs_and_a_run_time_trip_count_is_refused():
    proto, _ = _loop_model(trip_count_input=True)
    with pytest.raises(
        ConversionError,
        match=r"scan outputs need a constant trip count \(their first dim\); "
        r"'M' is computed at run time",
    ):
        onnx_to_hlo(opconv.load(proto))


def test_loop_whose_trip_count_is_constant_once_shapes_are_fixed():
    """(HLO bodies need static types where they are declared: the body here declares them, the trip count is
    folded from the outer x's fixed shape.)"""
    proto, feeds = _rows_loop_model(body_dims=[4, 3])
    hlo = _check(proto, [feeds], input_shapes={"x": (4, 3)})
    assert "While" in [n.op for n in hlo.graph.nodes]


def test_loop_body_of_undeclared_types_is_typed_from_its_starting_values():
    """ONNX's inference leaves a Loop's carried values without dims and its scan outputs without a first dim;
    once shapes are fixed the state keeps its starting value's type through the body, so the body and what
    reads the Loop's results get static types (opconv/converters/loop_shapes.py)."""
    proto, feeds = _rows_loop_model()
    hlo = _check(proto, [feeds], input_shapes={"x": (4, 3)})
    assert "While" in [n.op for n in hlo.graph.nodes]


def test_loop_state_that_changes_shape_is_not_typed_from_its_start():
    """A state that grows every iteration keeps no type through the body: the pin is undone, and the HLO
    conversion refuses the Loop (its state has no static type) instead of typing it wrongly."""
    from onnx import TensorProto, helper, numpy_helper

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Concat", ["y_in", "y_in"], ["y_out"], axis=0),
        ],
        "grow",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("y_in", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("y_out", TensorProto.FLOAT, None),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.int64(2), "M")],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ConversionError, match="not a static tensor type"):
        onnx_to_hlo(opconv.load(proto), input_shapes={"x": (2, 3)})

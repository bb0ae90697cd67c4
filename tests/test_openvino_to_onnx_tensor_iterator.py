"""TensorIterator -> ONNX Loop (``opconv ir-to-onnx``), checked against OpenVINO's CPU plugin.

Each model is built with OpenVINO's Python API and saved with ``openvino.save_model``; opconv reads the IR,
converts it to ONNX (which must pass ``onnx.checker``'s full check), and onnxruntime's outputs are compared
with the CPU plugin's and with opconv's IR executor's on the same inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import openvino as ov  # noqa: E402
import pytest
from click.testing import CliRunner
from openvino import opset1 as ops  # noqa: E402

import opconv  # noqa: E402
from opconv.cli import cli  # noqa: E402
from opconv.dialects.onnx.io import to_proto  # noqa: E402
from opconv.errors import ConversionError  # noqa: E402
from tests.test_openvino_executor import CONFIG, CORE, _r  # sets CI=true first
from tests.test_openvino_executor_rnn_conv import TI_MODELS, _run_opconv, _same, _ti_recurrent
from tests.test_openvino_to_onnx import _onnxruntime


def _two_states():
    """Two recurrent states (back edges), an invariant weight and bias, a reversed axis-0 input and output.

    The sliced input and the outputs also pass through layers outside the iterator; one output is the last
    value of a body result no back edge carries.
    """
    x = ops.parameter([5, 2, 3], np.float32, name="X")
    h0 = ops.parameter([2, 4], np.float32, name="H0")
    w = ops.parameter([3, 4], np.float32, name="W")
    xb = ops.parameter([1, 2, 3], np.float32, name="xb")
    hb = ops.parameter([2, 4], np.float32, name="hb")
    cb = ops.parameter([2, 4], np.float32, name="cb")
    wb = ops.parameter([3, 4], np.float32, name="wb")
    bb = ops.parameter([4], np.float32, name="bb")
    step = ops.reshape(xb, ops.constant(np.array([2, 3], np.int64)), False)
    h = ops.tanh(ops.add(ops.add(ops.matmul(step, wb, False, False), ops.multiply(hb, cb)), bb))
    c = ops.add(cb, ops.multiply(h, ops.constant(np.float32(0.5))))
    ho, co = ops.result(h), ops.result(c)
    yo = ops.result(ops.unsqueeze(h, ops.constant(np.array([0], np.int64))))
    so = ops.result(ops.reduce_sum(c, ops.constant(np.array([1], np.int64)), True))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([ho, co, yo, so], [xb, hb, cb, wb, bb], "body"))
    ti.set_sliced_input(xb, ops.relu(x).output(0), -1, -1, 1, 0, 0)
    ti.set_merged_input(hb, h0.output(0), ho.output(0))
    ti.set_merged_input(cb, ops.constant(np.full((2, 4), 0.25, np.float32)).output(0), co.output(0))
    ti.set_invariant_input(wb, w.output(0))
    ti.set_invariant_input(bb, ops.constant(np.float32([0.1, -0.2, 0.3, 0.0])).output(0))
    ys = ti.get_concatenated_slices(yo.output(0), -1, -1, 1, 0, 0)
    outputs = [ti.get_iter_value(co.output(0), -1), ops.multiply(ys, ys).output(0), ti.get_iter_value(so.output(0), -1)]
    feeds = {"X": _r(5, 2, 3, seed=30), "H0": _r(2, 4, seed=31), "W": _r(3, 4, seed=32) * 0.5}
    return ov.Model(outputs, [x, h0, w], "two_states"), feeds


def _pass_through():
    """Body results that are body inputs: the sliced part (concatenated and last), the invariant, a state."""
    x, w, h0 = (ops.parameter(s, np.float32, name=n) for s, n in (([3, 2], "X"), ([2], "W"), ([1, 2], "H0")))
    xb, wb, hb = (ops.parameter(s, np.float32, name=n) for s, n in (([1, 2], "xb"), ([2], "wb"), ([1, 2], "hb")))
    xo, wo, ho, so = ops.result(xb), ops.result(wb), ops.result(hb), ops.result(ops.add(xb, wb))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([xo, wo, ho, so], [xb, wb, hb], "body"))
    ti.set_sliced_input(xb, x.output(0), -1, -1, 1, 0, 0)
    ti.set_invariant_input(wb, w.output(0))
    ti.set_merged_input(hb, h0.output(0), so.output(0))
    outputs = [
        ti.get_concatenated_slices(xo.output(0), 0, 1, 1, -1, 0),
        ti.get_iter_value(wo.output(0), -1),
        ti.get_iter_value(ho.output(0), -1),
        ti.get_iter_value(xo.output(0), -1),
    ]
    return ov.Model(outputs, [x, w, h0], "pass_through"), {
        "X": _r(3, 2, seed=33),
        "W": _r(2, seed=34),
        "H0": _r(1, 2, seed=35),
    }


def _parts_of_2_out():
    """Parts of 2 taken from the back, each iteration's result (2 steps wide) concatenated both ways."""
    x = ops.parameter([2, 6, 3], np.float32, name="X")
    xb = ops.parameter([2, 2, 3], np.float32, name="xb")
    yo = ops.result(ops.multiply(xb, ops.constant(np.float32([2.0, -1.0, 0.5]))))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([yo], [xb], "body"))
    ti.set_sliced_input(xb, x.output(0), -1, -2, 2, 0, 1)
    outputs = [
        ti.get_concatenated_slices(yo.output(0), 0, 2, 2, -1, 1),
        ti.get_concatenated_slices(yo.output(0), -1, -2, 2, 0, 1),
    ]
    return ov.Model(outputs, [x], "parts_out"), {"X": _r(2, 6, 3, seed=36)}


MODELS = {**TI_MODELS, "two-states": _two_states, "pass-through": _pass_through, "parts-of-2-out": _parts_of_2_out}


def _run_openvino_file(xml, feeds) -> list:
    # Inputs by position: OpenVINO names a Parameter's tensor after a Result when the body passes it through.
    compiled = CORE.compile_model(CORE.read_model(str(xml)), "CPU", CONFIG)
    result = compiled(list(feeds.values()))
    return [result[compiled.output(k)] for k in range(len(compiled.outputs))]


def _convert(xml, opset=None) -> onnx.ModelProto:
    proto = to_proto(opconv.convert(opconv.load(xml), to="onnx", opset=opset))
    onnx.checker.check_model(proto, full_check=True)
    assert [n.op_type for n in proto.graph.node].count("Loop") == 1
    return proto


@pytest.mark.parametrize("kind", list(MODELS))
def test_tensor_iterator_becomes_a_loop_matching_openvino(kind, tmp_path):
    model, feeds = MODELS[kind]()
    xml = tmp_path / "ti.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    expected = _run_openvino_file(xml, feeds)
    actual = _onnxruntime(_convert(xml), feeds)
    _same(expected, actual, f"onnxruntime on the ONNX of {kind} vs OpenVINO")
    _same(_run_opconv(opconv.load(xml), feeds), actual, f"onnxruntime vs opconv's IR executor on {kind}")


def test_lowest_target_opset_and_fp16_weights(tmp_path):
    model, feeds = MODELS["reverse-parts-of-2"]()
    xml = tmp_path / "ti.xml"
    ov.save_model(model, str(xml), compress_to_fp16=True)  # the body's constants pass through Convert
    _same(_run_openvino_file(xml, feeds), _onnxruntime(_convert(xml, opset=13), feeds), "opset 13, f16 weights")


@pytest.mark.parametrize(
    "x_slice, steps", [((1, 1, 1, -2), [1, 2, 3, 4]), ((-2, -1, 1, 1), [4, 3, 2, 1]), ((0, 2, 1, -1), [0, 2, 4])]
)
def test_slice_bounds_follow_the_spec(x_slice, steps, tmp_path):
    # The CPU plugin ignores start/end beyond the iteration count they imply (see
    # test_openvino_executor_rnn_conv), so the expected values are the spec's loop written in numpy.
    model, feeds = _ti_recurrent(x_slice, (0, 1, 1, -1))
    xml = tmp_path / "ti.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    x, h, w = feeds["X"], feeds["H0"], feeds["W"]
    hs = []
    for t in steps:
        h = np.tanh(h @ w + x[:, t] * np.float32([0.75, -0.5, 1.25]))
        hs.append(h)
    _same([h, np.stack(hs, axis=1)], _onnxruntime(_convert(xml), feeds), f"slice {x_slice}")


def test_the_source_model_is_left_unchanged(tmp_path):
    model, feeds = MODELS["two-states"]()
    xml = tmp_path / "ti.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    ir = opconv.load(xml)
    before = _run_opconv(ir, feeds)
    opconv.convert(ir, to="onnx")
    body = next(n for n in ir.graph.nodes if n.op == "TensorIterator").attr("body")
    assert {n.domain for n in body.walk()} == {"opset1"} and len(body.inputs) == 5
    _same(before, _run_opconv(ir, feeds), "the IR after its conversion")


def test_cli_converts_and_verifies(tmp_path):
    model, _ = MODELS["parts-of-2"]()
    xml = tmp_path / "ti.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    out = tmp_path / "ti.onnx"
    result = CliRunner().invoke(cli, ["ir-to-onnx", str(xml), "-o", str(out), "--verify"])
    assert result.exit_code == 0, result.output
    assert "Loop 1" in result.output and "2 outputs equal" in result.output
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)


def test_a_body_layer_without_onnx_form_is_named(tmp_path):
    x = ops.parameter([2, 4, 3], np.float32, name="X")
    xb = ops.parameter([2, 1, 3], np.float32, name="xb")
    padded = ops.pad(
        xb,
        ops.constant(np.array([0, 0, 1], np.int64)),
        ops.constant(np.array([0, 0, 1], np.int64)),
        "symmetric",
        name="mirror",
    )
    out = ops.result(padded)
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([out], [xb], "body"))
    ti.set_sliced_input(xb, x.output(0), 0, 1, 1, -1, 1)
    model = ov.Model([ti.get_concatenated_slices(out.output(0), 0, 1, 1, -1, 1)], [x], "m")
    xml = tmp_path / "m.xml"
    ov.save_model(model, str(xml))
    with pytest.raises(ConversionError) as e:
        opconv.convert(opconv.load(xml), to="onnx")
    message = str(e.value)
    assert "2 node(s)" in message and "'mirror'" in message and "symmetric" in message
    assert "TensorIterator" in message and "its body keeps 1 layer(s) with no ONNX form" in message

"""ONNX RNN/GRU/LSTM -> opset1 (unrolled): the IR computes what onnxruntime computes, in OpenVINO's CPU plugin
and in opconv's IR executor, with random weights, padded batches and both directions.  (onnxruntime refuses
batch-major ``layout=1`` recurrent layers; ONNX's own *_batchwise node cases cover that layout.)"""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort
import openvino as ov
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.compare import compare_arrays

T, B, I, H = 5, 3, 4, 6
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(
    kind,
    direction="forward",
    layout=0,
    lens=None,
    lens_input=False,
    initial=False,
    peepholes=False,
    weights_as_inputs=False,
    **attrs,
):
    rng = np.random.default_rng(sum(map(ord, kind + direction)) + layout)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[kind]
    w = rng.uniform(-0.5, 0.5, (d, g * H, I)).astype(np.float32)
    r = rng.uniform(-0.5, 0.5, (d, g * H, H)).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, (d, 2 * g * H)).astype(np.float32)
    x_shape = [T, B, I] if layout == 0 else [B, T, I]
    state_shape = [d, B, H] if layout == 0 else [B, d, H]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)]
    inits, feeds = [], {"X": rng.standard_normal(x_shape).astype(np.float32)}
    for name, value in (("W", w), ("R", r), ("B", bias)):
        if weights_as_inputs:
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
            feeds[name] = value
        else:
            inits.append(numpy_helper.from_array(value, name))
    names = ["X", "W", "R", "B", "", "", "", ""]
    if lens is not None:
        names[4] = "lens"
        value = np.asarray(lens, np.int32)
        if lens_input:
            inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [B]))
            feeds["lens"] = value
        else:
            inits.append(numpy_helper.from_array(value, "lens"))
    if initial:
        names[5] = "h0"
        inputs.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, state_shape))
        feeds["h0"] = rng.standard_normal(state_shape).astype(np.float32)
        if kind == "LSTM":
            names[6] = "c0"
            inputs.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, state_shape))
            feeds["c0"] = rng.standard_normal(state_shape).astype(np.float32)
    if peepholes:
        names[7] = "P"
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, (d, 3 * H)).astype(np.float32), "P"))
    while names and not names[-1]:
        names.pop()
    outs = ["Y", "Y_h", "Y_c"][: 3 if kind == "LSTM" else 2]
    node = helper.make_node(kind, names, outs, hidden_size=H, direction=direction, layout=layout, **attrs)
    y_shape = [T, d, B, H] if layout == 0 else [B, T, d, H]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)] + [
        helper.make_tensor_value_info(o, TensorProto.FLOAT, state_shape) for o in outs[1:]
    ]
    graph = helper.make_graph([node], kind.lower(), inputs, outputs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    proto.ir_version = 8
    return proto, feeds


CASES = {
    "lstm": ("LSTM", {}),
    "lstm-bidirectional-padded": ("LSTM", dict(direction="bidirectional", lens=[5, 2, 4])),
    "lstm-reverse-padded-runtime-lens": (
        "LSTM",
        dict(direction="reverse", lens=[3, 5, 1], lens_input=True, initial=True),
    ),
    "lstm-peepholes-clip": ("LSTM", dict(peepholes=True, clip=0.7, initial=True)),
    "lstm-input-forget-activations": (
        "LSTM",
        dict(
            input_forget=1,
            activations=["HardSigmoid", "Softsign", "Relu"],
            activation_alpha=[0.3],
            activation_beta=[0.4],
        ),
    ),
    "lstm-weights-as-inputs": ("LSTM", dict(weights_as_inputs=True, direction="bidirectional")),
    "gru": ("GRU", {}),
    "gru-linear-before-reset-bidirectional": (
        "GRU",
        dict(direction="bidirectional", linear_before_reset=1, initial=True),
    ),
    "gru-padded": ("GRU", dict(lens=[1, 5, 3])),
    "gru-activations": ("GRU", dict(activations=["LeakyRelu", "Tanh"], activation_alpha=[0.2])),
    "rnn": ("RNN", dict(activations=["Tanh"])),
    "rnn-bidirectional-padded": ("RNN", dict(direction="bidirectional", lens=[2, 5, 5], activations=["Relu", "Tanh"])),
}


def _close(expected, actual, who):
    for name, value in expected.items():
        cmp = compare_arrays(name, value, np.asarray(actual[name]), rtol=1e-4, atol=1e-5)
        assert cmp.ok, f"{who}: {cmp.message}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent_layer_matches_onnxruntime(tmp_path, case):
    kind, options = CASES[case]
    proto, feeds = _model(kind, **options)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    converted = opconv.convert(opconv.load(proto), to="openvino")
    assert {n.op for n in converted.graph.nodes}.isdisjoint({"LSTM", "GRU", "RNN"})
    xml = str(tmp_path / "rnn.xml")
    opconv.save(converted, xml)
    _close(expected, opconv.run(opconv.load(xml), feeds), "opconv IR executor")
    core = ov.Core()
    compiled = core.compile_model(core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    _close(expected, {next(iter(o.get_names())): v for o, v in compiled(feeds).items()}, "OpenVINO CPU")


def test_lstm_fixture_converts(tmp_path, fixtures_dir):
    path = os.path.join(fixtures_dir, "lstm.onnx")
    feeds = {"seq": np.random.default_rng(3).standard_normal((10, 2, 6)).astype(np.float32)}
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    converted = opconv.convert(opconv.load(path), to="openvino", input_shapes={"seq": (10, 2, 6)})
    xml = str(tmp_path / "lstm.xml")
    opconv.save(converted, xml)
    _close(expected, opconv.run(opconv.load(xml), feeds), "opconv IR executor")
    core = ov.Core()
    compiled = core.compile_model(core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    _close(expected, {next(iter(o.get_names())): v for o, v in compiled(feeds).items()}, "OpenVINO CPU")

"""Build the small real models in ``fixtures/`` (seeded random weights, so real numbers flow).

    python scripts/make_fixtures.py            # (re)write fixtures/
    python scripts/make_fixtures.py --check    # exit 1 if the committed files differ

Models:
  cnn.onnx          Conv/BatchNorm/Relu/MaxPool/GlobalAveragePool/Flatten/Gemm/Softmax, opset 13
  transformer.onnx  one pre-norm transformer encoder layer (attention + GELU MLP), opset 17
  lstm.onnx         a one-layer LSTM over a sequence, then Gemm on the last state, opset 14
  mlp_external.onnx three Gemm layers whose weights live in mlp_external.onnx.data, opset 13
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")


def _rand(rng, *shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(graph, opset, name):
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="opconv-fixtures", producer_version="1"
    )
    model.ir_version = 8
    model.doc_string = f"opconv fixture: {name}"
    onnx.checker.check_model(model)
    return model


def cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [
        _init("conv1.w", _rand(rng, 8, 3, 3, 3)),
        _init("conv1.b", _rand(rng, 8)),
        _init("bn1.scale", 1 + _rand(rng, 8)),
        _init("bn1.bias", _rand(rng, 8)),
        _init("bn1.mean", _rand(rng, 8)),
        _init("bn1.var", 1 + np.abs(_rand(rng, 8))),
        _init("conv2.w", _rand(rng, 16, 8, 3, 3)),
        _init("conv2.b", _rand(rng, 16)),
        _init("fc.w", _rand(rng, 10, 16)),
        _init("fc.b", _rand(rng, 10)),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization",
            ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"],
            ["b1"],
            name="bn1",
            epsilon=1e-5,
        ),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(
            "Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", strides=[2, 2], pads=[1, 1, 1, 1], group=1
        ),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    return _model(graph, 13, "small CNN classifier")


def transformer() -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    d, heads, ff, seq = 32, 4, 64, 8
    hd = d // heads
    inits = [
        _init("ln1.g", 1 + _rand(rng, d)),
        _init("ln1.b", _rand(rng, d)),
        _init("wq", _rand(rng, d, d)),
        _init("wk", _rand(rng, d, d)),
        _init("wv", _rand(rng, d, d)),
        _init("wo", _rand(rng, d, d)),
        _init("bo", _rand(rng, d)),
        _init("ln2.g", 1 + _rand(rng, d)),
        _init("ln2.b", _rand(rng, d)),
        _init("w1", _rand(rng, d, ff)),
        _init("b1", _rand(rng, ff)),
        _init("w2", _rand(rng, ff, d)),
        _init("b2", _rand(rng, d)),
        _init("heads_shape", np.array([0, seq, heads, hd], np.int64)),
        _init("model_shape", np.array([0, seq, d], np.int64)),
        _init("scale", np.array(1 / np.sqrt(hd), np.float32)),
        _init("sqrt2", np.array(np.sqrt(2), np.float32)),
        _init("one", np.array(1, np.float32)),
        _init("half", np.array(0.5, np.float32)),
    ]
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln1.g", "ln1.b"], ["h"], name="ln1", axis=-1, epsilon=1e-5),
        *[n("MatMul", ["h", w], [w + "_p"], name=f"proj_{w}") for w in ("wq", "wk", "wv")],
        *[n("Reshape", [w + "_p", "heads_shape"], [w + "_r"], name=f"split_heads_{w}") for w in ("wq", "wk", "wv")],
        n("Transpose", ["wq_r"], ["q"], name="q_t", perm=[0, 2, 1, 3]),
        n("Transpose", ["wk_r"], ["kT"], name="k_t", perm=[0, 2, 3, 1]),
        n("Transpose", ["wv_r"], ["v"], name="v_t", perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kT"], ["scores"], name="qk"),
        n("Mul", ["scores", "scale"], ["scaled"], name="scale_scores"),
        n("Softmax", ["scaled"], ["attn"], name="attn_softmax", axis=-1),
        n("MatMul", ["attn", "v"], ["ctx"], name="attn_v"),
        n("Transpose", ["ctx"], ["ctx_t"], name="merge_t", perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "model_shape"], ["ctx_m"], name="merge_heads"),
        n("MatMul", ["ctx_m", "wo"], ["o"], name="out_proj"),
        n("Add", ["o", "bo"], ["o_b"], name="out_bias"),
        n("Add", ["x", "o_b"], ["res1"], name="residual1"),
        n("LayerNormalization", ["res1", "ln2.g", "ln2.b"], ["h2"], name="ln2", axis=-1, epsilon=1e-5),
        n("MatMul", ["h2", "w1"], ["f1"], name="ff1"),
        n("Add", ["f1", "b1"], ["f1b"], name="ff1_bias"),
        # GELU, erf form: 0.5 * x * (1 + erf(x / sqrt(2)))
        n("Div", ["f1b", "sqrt2"], ["g_div"], name="gelu_div"),
        n("Erf", ["g_div"], ["g_erf"], name="gelu_erf"),
        n("Add", ["g_erf", "one"], ["g_add"], name="gelu_add"),
        n("Mul", ["f1b", "g_add"], ["g_mul"], name="gelu_mul"),
        n("Mul", ["g_mul", "half"], ["gelu"], name="gelu_half"),
        n("MatMul", ["gelu", "w2"], ["f2"], name="ff2"),
        n("Add", ["f2", "b2"], ["f2b"], name="ff2_bias"),
        n("Add", ["res1", "f2b"], ["y"], name="residual2"),
    ]
    graph = helper.make_graph(
        nodes,
        "transformer_encoder_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, d])],
        inits,
    )
    return _model(graph, 17, "one transformer encoder layer")


def lstm() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    inp, hidden, classes = 6, 12, 5
    inits = [
        _init("W", _rand(rng, 1, 4 * hidden, inp, scale=0.3)),
        _init("R", _rand(rng, 1, 4 * hidden, hidden, scale=0.3)),
        _init("B", _rand(rng, 1, 8 * hidden)),
        _init("fc.w", _rand(rng, hidden, classes, scale=0.3)),
        _init("fc.b", _rand(rng, classes)),
        _init("squeeze_axes", np.array([0], np.int64)),
    ]
    nodes = [
        helper.make_node("LSTM", ["seq", "W", "R", "B"], ["Y", "Y_h", "Y_c"], name="lstm", hidden_size=hidden),
        helper.make_node("Squeeze", ["Y_h", "squeeze_axes"], ["h_last"], name="last_state"),
        helper.make_node("Gemm", ["h_last", "fc.w", "fc.b"], ["logits"], name="classifier"),
    ]
    graph = helper.make_graph(
        nodes,
        "lstm_classifier",
        [helper.make_tensor_value_info("seq", TensorProto.FLOAT, [10, "batch", inp])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes]),
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [10, 1, "batch", hidden]),
        ],
        inits,
    )
    return _model(graph, 14, "LSTM sequence classifier")


def mlp_external() -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    sizes = [64, 128, 128, 10]
    inits, nodes, x = [], [], "x"
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        inits += [_init(f"fc{i}.w", _rand(rng, a, b)), _init(f"fc{i}.b", _rand(rng, b))]
        out = "y" if i == len(sizes) - 2 else f"h{i}"
        nodes.append(
            helper.make_node("Gemm", [x, f"fc{i}.w", f"fc{i}.b"], [out + ("" if out == "y" else "_lin")], name=f"fc{i}")
        )
        if out != "y":
            nodes.append(helper.make_node("Relu", [out + "_lin"], [out], name=f"relu{i}"))
        x = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", sizes[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", sizes[-1]])],
        inits,
    )
    return _model(graph, 13, "MLP with external weights")


def write_all(folder: str) -> list[str]:
    written = []
    for name, build in (("cnn", cnn), ("transformer", transformer), ("lstm", lstm)):
        path = os.path.join(folder, f"{name}.onnx")
        onnx.save(build(), path)
        written.append(path)
    path = os.path.join(folder, "mlp_external.onnx")
    onnx.save(
        mlp_external(),
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="mlp_external.onnx.data",
        size_threshold=0,
    )
    written += [path, path + ".data"]
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = parser.parse_args()
    if not args.check:
        os.makedirs(FIXTURES, exist_ok=True)
        for path in write_all(FIXTURES):
            print("wrote", os.path.relpath(path, ROOT))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        stale = []
        for path in write_all(tmp):
            committed = os.path.join(FIXTURES, os.path.basename(path))
            with open(path, "rb") as a:
                fresh = a.read()
            if not os.path.exists(committed) or open(committed, "rb").read() != fresh:
                stale.append(os.path.basename(path))
    if stale:
        print("stale fixtures: " + ", ".join(stale) + " (run scripts/make_fixtures.py)")
        return 1
    print("fixtures are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())

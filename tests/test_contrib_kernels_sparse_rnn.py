"""ONNX Runtime's contrib operators with unusual inputs: SparseToDenseMatMul (a sparse tensor input, fed to
onnxruntime as an OrtValue and to opconv as an opconv.ir.SparseTensor) and AttnLSTM (an LSTM wrapped in
Bahdanau attention); opconv's kernels against onnxruntime's CPU execution provider."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import opconv
from opconv.compare import compare_arrays
from opconv.errors import OpconvError
from opconv.ir import SparseTensor

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
RNG = np.random.default_rng(1414)


# ---------------------------------------------------------------- SparseToDenseMatMul


def sparse_matmul_model(a_dims, b_shape, dtype, **attrs):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("SparseToDenseMatMul", ["A", "B"], ["Y"], domain=MS, **attrs)
    graph = helper.make_graph(
        [node],
        "sparse_matmul",
        [helper.make_sparse_tensor_value_info("A", elem, a_dims), helper.make_tensor_value_info("B", elem, b_shape)],
        [helper.make_tensor_value_info("Y", elem, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def random_coo(dims, dtype, density, linear):
    dense_positions = np.flatnonzero(RNG.random(int(np.prod(dims))) < density)
    values = (
        RNG.uniform(-4, 4, dense_positions.size)
        if np.dtype(dtype).kind == "f"
        else RNG.integers(0, 9, dense_positions.size)
    ).astype(dtype)
    indices = dense_positions if linear else np.stack(np.unravel_index(dense_positions, dims), axis=-1)
    return values, indices.astype(np.int64)


def ort_sparse_matmul(model, dims, values, indices, b):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    device = ort.OrtDevice.make("cpu", 0)
    if indices.ndim == 1:  # onnxruntime's kernel takes [NNZ, 2] coordinates only; opconv also linear positions
        indices = np.stack(np.unravel_index(indices, dims), axis=-1).astype(np.int64)
    a = ort.SparseTensor.sparse_coo_from_numpy(np.array(dims, np.int64), values, indices, device)
    feeds = {"A": ort.OrtValue.ort_value_from_sparse_tensor(a), "B": ort.OrtValue.ortvalue_from_numpy(b)}
    return session.run_with_ort_values(["Y"], feeds)[0].numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32])
@pytest.mark.parametrize(
    "trans_a,trans_b,alpha,linear,density",
    [(0, 0, 1.0, False, 0.3), (1, 0, 2.0, False, 0.5), (0, 1, 0.5, True, 0.2), (1, 1, 1.0, True, 0.0)],
)
def test_sparse_to_dense_matmul(dtype, trans_a, trans_b, alpha, linear, density):
    m, k, n = 5, 7, 3
    a_dims = (k, m) if trans_a else (m, k)
    b = (
        RNG.uniform(-2, 2, (n, k) if trans_b else (k, n))
        if np.dtype(dtype).kind == "f"
        else RNG.integers(-5, 5, (n, k) if trans_b else (k, n))
    ).astype(dtype)
    values, indices = random_coo(a_dims, dtype, density, linear)
    # onnxruntime's shape inference for this op ignores transA/transB, so transposed cases declare no shapes
    shapes = (None, None) if trans_a or trans_b else (list(a_dims), list(b.shape))
    model = sparse_matmul_model(*shapes, dtype, transA=trans_a, transB=trans_b, alpha=alpha)
    expected = ort_sparse_matmul(model, a_dims, values, indices, b)
    actual = opconv.run(opconv.load(model), {"A": SparseTensor.from_coo(values, indices, a_dims), "B": b})["Y"]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    report = compare_arrays("Y", expected, actual, None, None)
    assert report.ok, report.message


def test_a_sparse_input_fed_a_dense_array_is_refused_by_name():
    model = sparse_matmul_model([2, 2], [2, 2], np.float32)
    with pytest.raises(OpconvError, match="input 'A' is a sparse tensor"):
        opconv.run(opconv.load(model), {"A": np.eye(2, dtype=np.float32), "B": np.eye(2, dtype=np.float32)})


# ---------------------------------------------------------------- AttnLSTM


def rand(*shape, scale=0.5):
    return RNG.uniform(-scale, scale, shape).astype(np.float32)


@pytest.mark.parametrize(
    "direction,with_layer,with_lengths,with_extras,attrs",
    [
        ("forward", False, False, False, {}),
        ("forward", True, True, True, {}),
        ("reverse", True, True, False, {}),
        ("reverse", False, False, True, {"clip": 0.7}),
        ("bidirectional", True, True, True, {}),
        ("bidirectional", False, True, False, {"input_forget": 1}),
        (
            "forward",
            True,
            False,
            True,
            {"activations": ["HardSigmoid", "Tanh", "Softsign"], "activation_alpha": [0.3], "activation_beta": [0.4]},
        ),
    ],
)
def test_attn_lstm(direction, with_layer, with_lengths, with_extras, attrs):
    from .test_contrib_kernels_nn import assert_matches_ort

    steps, batch, inputs, hidden, memory_steps, memory_depth, attn, layer = 4, 3, 5, 6, 7, 4, 5, 3
    dirs = 2 if direction == "bidirectional" else 1
    if attrs.get("activations") and dirs == 2:
        attrs = {**attrs, "activations": attrs["activations"] * 2}
    attention_size = layer if with_layer else memory_depth
    feeds = {
        "X": rand(steps, batch, inputs, scale=1.0),
        "W": rand(dirs, 4 * hidden, inputs + attention_size),
        "R": rand(dirs, 4 * hidden, hidden),
        "B": rand(dirs, 8 * hidden) if with_extras else None,
        "sequence_lens": np.array([4, 2, 3], np.int32) if with_lengths else None,
        "initial_h": rand(dirs, batch, hidden) if with_extras else None,
        "initial_c": rand(dirs, batch, hidden) if with_extras else None,
        "P": rand(dirs, 3 * hidden) if with_extras else None,
        "QW": rand(dirs, hidden, attn),
        "MW": rand(dirs, memory_depth, attn),
        "V": rand(dirs, attn),
        "M": rand(batch, memory_steps, memory_depth, scale=1.0),
        "memory_seq_lens": np.array([7, 3, 5], np.int32) if with_lengths else None,
        "AW": rand(dirs, hidden + memory_depth, layer) if with_layer else None,
    }
    # Y is always asked for: onnxruntime's kernel feeds each step's Y to the attention, and has none without it
    assert_matches_ort("AttnLSTM", feeds, ("Y", "Y_h", "Y_c"), hidden_size=hidden, direction=direction, **attrs)

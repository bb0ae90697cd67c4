"""ONNX Runtime's contrib operators with unusual inputs: SparseToDenseMatMul (a sparse tensor input, fed to
onnxruntime as an OrtValue and to opconv as an opconv.ir.SparseTensor) and AttnLSTM (an LSTM wrapped in
Bahdanau attention); opconv's kernels against onnxruntime's CPU execution provider."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

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
    graph = helper.make_graph([node], "sparse_matmul",
                              [helper.make_sparse_tensor_value_info("A", elem, a_dims),
                               helper.make_tensor_value_info("B", elem, b_shape)],
                              [helper.make_tensor_value_info("Y", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def random_coo(dims, dtype, density, linear):
    dense_positions = np.flatnonzero(RNG.random(int(np.prod(dims))) < density)
    values = (RNG.uniform(-4, 4, dense_positions.size) if np.dtype(dtype).kind == "f"
              else RNG.integers(0, 9, dense_positions.size)).astype(dtype)
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
@pytest.mark.parametrize("trans_a,trans_b,alpha,linear,density", [
    (0, 0, 1.0, False, 0.3), (1, 0, 2.0, False, 0.5), (0, 1, 0.5, True, 0.2), (1, 1, 1.0, True, 0.0)])
def test_sparse_to_dense_matmul(dtype, trans_a, trans_b, alpha, linear, density):
    m, k, n = 5, 7, 3
    a_dims = (k, m) if trans_a else (m, k)
    b = (RNG.uniform(-2, 2, (n, k) if trans_b else (k, n)) if np.dtype(dtype).kind == "f"
         else RNG.integers(-5, 5, (n, k) if trans_b else (k, n))).astype(dtype)
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

"""Shared helpers for the kernel tests: run one ONNX node on onnxruntime.

onnxruntime is the independent oracle: each test builds a single-node model
with ``onnx.helper``, runs it single-threaded with graph optimizations off, and
compares with the kernel called in the dialect-neutral convention.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper

DEFAULT_OPSET = 21


def run_ort(
    op_type: str, inputs, attrs: dict | None = None, n_outputs: int = 1, opset: int = DEFAULT_OPSET, domain: str = ""
) -> list[np.ndarray]:
    """Run ``op_type`` on ``inputs`` (a list; ``None`` = omitted optional input)."""
    names, feeds, graph_inputs = [], {}, []
    for i, value in enumerate(inputs):
        if value is None:
            names.append("")
            continue
        name = f"in{i}"
        value = np.asarray(value)
        names.append(name)
        feeds[name] = value
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
        graph_inputs.append(helper.make_tensor_value_info(name, elem, value.shape))
    while names and names[-1] == "":
        names.pop()
    outputs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outputs, domain=domain, **(attrs or {}))
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(outputs, feeds)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    """Compare values, shapes and dtypes (NaNs compare equal)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if actual.dtype.kind in "iubOSU":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(
            actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
        )


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_run_ort_smoke():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = run_ort("Add", [a, a])
    assert_close(out, a + a)


def test_run_ort_omitted_optional_input():
    x = np.array([-2.0, 0.5, 3.0], dtype=np.float32)
    (out,) = run_ort("Clip", [x, None, np.array(1.0, np.float32)])
    assert_close(out, np.minimum(x, 1.0))

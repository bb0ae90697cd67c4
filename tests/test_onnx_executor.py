"""The ONNX executor beyond single-op cases: whole light models, sessions, input checking.

The light models' weights are built at run time by ConstantOfShape (uniform
values), so their outputs barely depend on the input.  ``_with_random_weights``
replaces every such weight by a seeded random tensor (a standard zero-centred
initialisation), which makes the
comparison with onnxruntime on random inputs meaningful (SqueezeNet's opset-9
Softmax coerces to 2-D; DenseNet's opset-9 BatchNormalization uses the stored
statistics: both are checked this way).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv import testdata
from opconv.compare import compare_arrays
from opconv.errors import ExecutionError
from tests.runtimes import run_ort

LIGHT = testdata.light_cases()


@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model_matches_expected_output(case):
    model = case.load_model()
    out = opconv.run(opconv.load(case.path), testdata.random_feeds(model))
    cmp = compare_arrays("out", case.datasets[0][1][0], next(iter(out.values())))
    assert cmp.ok, cmp.message


def _with_random_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    # BatchNormalization's scale (input 1) and variance (input 4) must stay positive.
    positive = {n.input[i] for n in m.graph.node if n.op_type == "BatchNormalization" for i in (1, 4)}
    kept = []
    for node in m.graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        name = node.output[0]
        shape = tuple(int(d) for d in inits[node.input[0]])
        if name in positive:
            w = rng.uniform(0.5, 1.5, shape)
        else:  # zero-centred, variance 1/fan_in: activations keep their scale through the layers
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            w = rng.uniform(-1, 1, shape) * np.sqrt(3 / fan_in)
        m.graph.initializer.append(numpy_helper.from_array(w.astype(np.float32), name))
    del m.graph.node[:]
    m.graph.node.extend(kept)
    return m


@pytest.mark.slow
@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model_with_random_weights_matches_onnxruntime(case):
    model = _with_random_weights(case.load_model())
    feeds = testdata.random_feeds(model, seed=1)
    expected = run_ort(model, feeds)[0]
    actual = next(iter(opconv.run(opconv.load(model), feeds).values()))
    assert np.std(expected) > 0, "the random-weight variant should not be constant"
    cmp = compare_arrays("out", expected, actual)
    assert cmp.ok, cmp.message


def _small_model(overridable_w: bool = False):
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["ones"], value=numpy_helper.from_array(np.ones(1, np.float32))),
        helper.make_node("Add", ["x", "ones"], ["t"]),
        helper.make_node("Mul", ["t", "w"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])]
    if overridable_w:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [3]))
    graph = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.array([3], np.int64), "shape"),
            numpy_helper.from_array(np.full(3, 2, np.float32), "w"),
        ],
    )
    return opconv.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def test_session_runs_repeatedly_with_folded_constants():
    session = opconv.prepare(_small_model())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(3):
        np.testing.assert_array_equal(session.run({"x": x})["y"], (x + 1) * 2)


def test_an_initializer_that_is_an_input_can_be_overridden():
    session = opconv.prepare(_small_model(overridable_w=True))
    x = np.zeros((1, 3), np.float32)
    np.testing.assert_array_equal(session.run({"x": x})["y"], np.full((1, 3), 2, np.float32))
    np.testing.assert_array_equal(
        session.run({"x": x, "w": np.full(3, 5, np.float32)})["y"], np.full((1, 3), 5, np.float32)
    )


@pytest.mark.parametrize(
    "feeds, message",
    [
        ({"x": np.zeros((2, 3), np.float64)}, "input 'x' expects float32, got float64"),
        ({"x": np.zeros((2, 4), np.float32)}, "input 'x' expects shape [n,3], got [2, 4]"),
        ({"x": np.zeros((2, 3, 1), np.float32)}, "input 'x' expects rank 2"),
        ({"x": np.zeros((2, 3), np.float32), "z": np.zeros(1)}, "unknown input(s) 'z'"),
        ({}, "missing input(s) 'x'"),
    ],
)
def test_bad_inputs_are_named(feeds, message):
    with pytest.raises(ExecutionError) as e:
        opconv.run(_small_model(), feeds)
    assert message in str(e.value)


def test_random_ops_are_deterministic_given_a_seed():
    graph = helper.make_graph(
        [helper.make_node("RandomUniform", [], ["y"], shape=[4])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = opconv.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    a, b, c = (opconv.run(model, {}, seed=s)["y"] for s in (1, 1, 2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)

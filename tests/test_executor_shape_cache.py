"""The interpreter's shape cache (executor._ShapeCache): steps computing from constants and feed shapes alone
(an export's ``Shape -> Gather -> Unsqueeze -> Concat -> Expand``) run once per feed shapes; a Shape of a
computed value checks its input's shape on each run and, when that shape changed under the same feed shapes,
the run starts again without the cache.

Outputs are checked against onnxruntime on every run, feed shapes alternating, and against the real LSTM export
of the corpus."""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv

RNG = np.random.default_rng(13)
CORPUS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "corpus")


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(nodes, initializers, outputs):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _zeros_like_rows():
    """y = x + Expand(0.5, [Shape(x)[0], 1]) and z = Sigmoid(x) + Expand(1, Shape(Sigmoid(x))): the zero-state
    pattern of an exported LSTM, the second through a computed value."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
        helper.make_node("Unsqueeze", ["rows", "zero_axis"], ["rows1"]),
        helper.make_node("Concat", ["rows1", "one"], ["target"], axis=0),
        helper.make_node("Expand", ["half", "target"], ["halves"]),
        helper.make_node("Add", ["x", "halves"], ["y"]),
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Shape", ["s"], ["s_shape"]),
        helper.make_node("Expand", ["unit", "s_shape"], ["units"]),
        helper.make_node("Add", ["s", "units"], ["z"]),
    ]
    initializers = [
        _ints("zero", 0),
        _ints("zero_axis", [0]),
        _ints("one", [1]),
        numpy_helper.from_array(np.array([0.5], np.float32), "half"),
        numpy_helper.from_array(np.array([1.0], np.float32), "unit"),
    ]
    return _model(nodes, initializers, ["y", "z"])


def _check_runs(model, feeds_per_run):
    session = opconv.prepare(opconv.load(model))
    oracle = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in oracle.get_outputs()]
    for feeds in feeds_per_run:
        got = session.run(feeds)
        for name, expected in zip(names, oracle.run(None, feeds)):
            assert got[name].shape == expected.shape
            np.testing.assert_allclose(got[name], expected, rtol=1e-6, atol=1e-6)
    return session


def test_shape_steps_run_once_per_feed_shapes():
    model = _zeros_like_rows()
    shapes = [3, 3, 3, 5, 5, 3, 7, 3]
    session = _check_runs(model, [{"x": RNG.standard_normal((n, 4)).astype(np.float32)} for n in shapes])
    plan = session._interpreter.plan(session.model.graph)
    cache = plan.shape_cache
    assert cache is not None and cache.key[0][1] == (3, 4)
    # Left out of a cached run: Shape(x), Gather, Unsqueeze, Concat, Expand; Shape(s) is a guard, its Expand
    # is left out too.
    assert [r[4].op for r in cache.records] == ["Add", "Sigmoid", "Shape", "Add"]
    assert len(plan.records(True)) == 9  # the Unsqueeze is applied by the Gather (fuse_view_steps)


def test_a_computed_shape_that_changes_under_the_same_feed_shape_reruns_without_the_cache():
    # NonZero's output shape depends on x's values: the guard on Shape(nonzero) sees it change.
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["nz_shape"]),
        helper.make_node("Cast", ["nz_shape"], ["counts"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Add", ["counts", "total"], ["y"]),
    ]
    model = _model(nodes, [], ["y"])
    feeds = []
    for zeros in [2, 2, 2, 5, 5, 0, 2]:
        x = RNG.standard_normal((3, 4)).astype(np.float32)
        x.reshape(-1)[:zeros] = 0
        feeds.append({"x": x})
    session = _check_runs(model, feeds)
    assert session._interpreter.plan(session.model.graph).shape_cache is not None


def test_the_lstm_export_computes_its_zero_states_once():
    stored = np.load(os.path.join(CORPUS, "lstm_classifier_legacy_op12.npz"))
    feeds = {k.split(":", 1)[1]: v for k, v in stored.items() if k.startswith("input:")}
    path = os.path.join(CORPUS, "lstm_classifier_legacy_op12.onnx")
    session = opconv.prepare(opconv.load(path))
    (expected,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for _ in range(3):
        (got,) = session.run(feeds).values()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    cache = session._interpreter.plan(session.model.graph).shape_cache
    assert cache is not None and len(cache.records) < len(session._interpreter.plan(session.model.graph).steps)


def test_feeds_are_checked_again_whenever_their_names_types_or_shapes_change():
    # A session skips the feed checks for arrays like the last ones checked; anything else is checked.
    session = opconv.prepare(opconv.load(_zeros_like_rows()))
    good = RNG.standard_normal((3, 4)).astype(np.float32)
    for _ in range(2):
        session.run({"x": good})
    for bad, message in [(good.astype(np.float64), "expects float32"), (good[:, :3], "expects"), ("x", "got string")]:
        with pytest.raises(opconv.OpconvError, match=message):
            session.run({"x": bad})
    with pytest.raises(opconv.OpconvError, match="unknown input"):
        session.run({"x": good, "extra": good})

"""Session.profile (opconv/executor.py): one run's time, the part spent in kernels, the steps that ran.

The benchmark's per-step overhead is (seconds - kernel_seconds) / steps; folded steps do not run again.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import opconv

F = TensorProto.FLOAT


def test_profile_counts_the_steps_a_run_executes_and_times_their_kernels():
    # Two steps fold (they read constants only), three run on the feed.
    nodes = [
        helper.make_node("Neg", ["c"], ["nc"]),
        helper.make_node("Exp", ["nc"], ["ec"]),
        helper.make_node("Add", ["x", "ec"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Sqrt", ["r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, [2, 3])],
        [numpy_helper.from_array(np.array([0.5, 1.0, 2.0], np.float32), "c")],
    )
    session = opconv.prepare(opconv.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))
    x = np.array([[-1, 0, 1], [2, 3, 4]], np.float32)
    profile = session.profile({"x": x})
    assert profile.steps == 3
    assert 0 < profile.kernel_seconds <= profile.seconds
    assert profile.overhead_per_step == (profile.seconds - profile.kernel_seconds) / 3
    # Profiling leaves the session as it was: a plain run still gives the model's numbers.
    expected = np.sqrt(np.maximum(x + np.exp(-np.array([0.5, 1.0, 2.0], np.float32)), 0))
    np.testing.assert_allclose(session.run({"x": x})["y"], expected, rtol=1e-6)

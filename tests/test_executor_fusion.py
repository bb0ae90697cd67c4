"""The ONNX executor's session-time fusions (opconv/dialects/onnx/fusion.py): Conv -> inference
BatchNormalization runs as one convolution (its folded weights packed with their bias), and a Relu (or a
Clip with constant bounds) alone reading a Conv, Add or Sum output runs inside that step.

Checked against onnxruntime on random weights: plain pairs, grouped and biased convolutions, pairs that must
not fuse (the Conv output used elsewhere or returned, training-mode statistics), models whose initializers
are also inputs, where a run that feeds a BatchNormalization parameter must see its feed, and Relus that
must not fuse (an input with two readers, or returned).
"""

from __future__ import annotations

import copy

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.dialects.onnx import fusion
from opconv.kernels import elementwise

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def _params(channels: int, in_channels: int, group: int, bias: bool) -> list:
    arrays = {
        "w": RNG.standard_normal((channels, in_channels // group, 3, 3)).astype(np.float32),
        "scale": RNG.uniform(0.5, 2, channels).astype(np.float32),
        "shift": RNG.standard_normal(channels).astype(np.float32),
        "mean": RNG.standard_normal(channels).astype(np.float32),
        "var": RNG.uniform(0.1, 3, channels).astype(np.float32),
    }
    if bias:
        arrays["b"] = RNG.standard_normal(channels).astype(np.float32)
    return [numpy_helper.from_array(a, k) for k, a in arrays.items()]


def _model(*, group=1, bias=False, extra_use=False, conv_is_output=False, ir_version=8, opset=15):
    conv_inputs = ["x", "w"] + (["b"] if bias else [])
    nodes = [
        helper.make_node("Conv", conv_inputs, ["c"], group=group, pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], epsilon=1e-3),
        helper.make_node("Relu", ["y"], ["r"]),
    ]
    outputs = ["r"]
    if extra_use:
        nodes.append(helper.make_node("Sigmoid", ["c"], ["s"]))
        outputs.append("s")
    if conv_is_output:
        outputs.append("c")
    initializers = _params(8, 4, group, bias)
    inputs = [helper.make_tensor_value_info("x", F, [2, 4, 9, 9])]
    if ir_version < 4:  # every initializer is also an input, so a run may feed it
        inputs += [helper.make_tensor_value_info(t.name, F, list(t.dims)) for t in initializers]
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info(n, F, None) for n in outputs], initializers
    )
    return helper.make_model(graph, ir_version=ir_version, opset_imports=[helper.make_opsetid("", opset)])


def _fused_pairs(proto, fuse=fusion.fuse_conv_batch_norm) -> int:
    """How many node pairs ``fuse`` (a function of fusion.py) fused when a session was made."""
    counts = []
    name = fuse.__name__

    def spy(graph, plan):
        counts.append(fuse(graph, plan))
        return counts[-1]

    setattr(fusion, name, spy)
    try:
        opconv.prepare(opconv.load(proto))
    finally:
        setattr(fusion, name, fuse)
    return counts[0]


def _compare(proto, feeds):
    theirs = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    names = [o.name for o in proto.graph.output]
    ours = opconv.prepare(opconv.load(proto)).run(feeds)
    for name, expected in zip(names, theirs):
        np.testing.assert_allclose(ours[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("group,bias,opset", [(1, False, 15), (2, True, 15), (4, False, 9), (1, True, 7)])
def test_conv_batch_norm_pairs_fuse_and_match_onnxruntime(group, bias, opset):
    proto = _model(group=group, bias=bias, opset=opset)
    assert _fused_pairs(proto) == 1
    _compare(proto, {"x": RNG.standard_normal((2, 4, 9, 9)).astype(np.float32)})


@pytest.mark.parametrize("kwargs", [{"extra_use": True}, {"conv_is_output": True}])
def test_a_conv_output_needed_elsewhere_is_not_fused(kwargs):
    proto = _model(**kwargs)
    assert _fused_pairs(proto) == 0
    _compare(proto, {"x": RNG.standard_normal((2, 4, 9, 9)).astype(np.float32)})


def test_training_mode_batch_norm_is_not_fused():
    proto = _model()
    bn = proto.graph.node[1]
    bn.attribute.append(helper.make_attribute("training_mode", 1))
    assert _fused_pairs(proto) == 0


def test_a_fed_batch_norm_parameter_reaches_the_fused_convolution():
    proto = _model(ir_version=3, opset=9)
    assert _fused_pairs(proto) == 1
    x = RNG.standard_normal((2, 4, 9, 9)).astype(np.float32)
    session = opconv.prepare(opconv.load(proto))
    fed_scale = RNG.uniform(-2, 2, 8).astype(np.float32)
    # onnxruntime's reference for the fed run: the same model with the fed value as its initializer.
    refed = copy.deepcopy(proto)
    next(t for t in refed.graph.initializer if t.name == "scale").CopyFrom(numpy_helper.from_array(fed_scale, "scale"))
    for feeds, model in (({"x": x}, proto), ({"x": x, "scale": fed_scale}, refed), ({"x": x}, proto)):
        expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x}
        )[0]
        np.testing.assert_allclose(session.run(feeds)["r"], expected, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- Relu fused into the step computing its input


def _graph(nodes, inputs, outputs, initializers=(), opset=15):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, shape) for n, shape in inputs],
        [helper.make_tensor_value_info(n, F, None) for n in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


_X = ("x", [2, 4, 9, 9])
_CONV = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
_BN = helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"])

# name -> (nodes, inputs, outputs, how many Relus fuse)
RELU_GRAPHS = {
    "conv": ([_CONV, helper.make_node("Relu", ["c"], ["r"])], [_X], ["r"], 1),
    "conv_batch_norm": ([_CONV, _BN, helper.make_node("Relu", ["y"], ["r"])], [_X], ["r"], 1),
    "add": (
        [
            helper.make_node("Neg", ["x"], ["m"]),
            helper.make_node("Add", ["m", "x2"], ["s"]),
            helper.make_node("Relu", ["s"], ["r"]),
        ],
        [_X, ("x2", [2, 4, 9, 9])],
        ["r"],
        1,
    ),
    "add_broadcast": (
        [helper.make_node("Add", ["x", "row"], ["s"]), helper.make_node("Relu", ["s"], ["r"])],
        [_X, ("row", [9])],
        ["r"],
        1,
    ),
    "sum": (
        [
            helper.make_node("Neg", ["x"], ["m"]),
            helper.make_node("Sum", ["m", "x", "x2"], ["s"]),
            helper.make_node("Relu", ["s"], ["r"]),
        ],
        [_X, ("x2", [2, 4, 9, 9])],
        ["r"],
        1,
    ),
    # a one-input Sum hands back its input, the caller's feed: the Relu must not write into it
    "sum_of_a_feed": ([helper.make_node("Sum", ["x"], ["s"]), helper.make_node("Relu", ["s"], ["r"])], [_X], ["r"], 1),
    # Add's first input is read again later: Add must not reuse it, nor may the Relu
    "add_input_read_later": (
        [
            helper.make_node("Neg", ["x"], ["m"]),
            helper.make_node("Add", ["m", "x"], ["s"]),
            helper.make_node("Relu", ["s"], ["r"]),
            helper.make_node("Sub", ["m", "x"], ["t"]),
        ],
        [_X],
        ["r", "t"],
        1,
    ),
    # not fused: the Relu's input has another reader, or is returned, or comes from another op
    "two_readers": (
        [_CONV, helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Sigmoid", ["c"], ["g"])],
        [_X],
        ["r", "g"],
        0,
    ),
    "returned": ([_CONV, helper.make_node("Relu", ["c"], ["r"])], [_X], ["c", "r"], 0),
    "batch_norm_output_two_readers": (
        [_CONV, _BN, helper.make_node("Relu", ["y"], ["r"]), helper.make_node("Neg", ["y"], ["n"])],
        [_X],
        ["r", "n"],
        0,
    ),
    "mul": ([helper.make_node("Mul", ["x", "x"], ["m"]), helper.make_node("Relu", ["m"], ["r"])], [_X], ["r"], 0),
    # Clip with constant bounds (ReLU6) fuses as Relu does; a bound a run feeds does not
    "conv_clip": ([_CONV, helper.make_node("Clip", ["c", "zero", "six"], ["r"])], [_X], ["r"], 1),
    "add_clip_low_only": (
        [
            helper.make_node("Neg", ["x"], ["m"]),
            helper.make_node("Add", ["m", "x2"], ["s"]),
            helper.make_node("Clip", ["s", "zero"], ["r"]),
        ],
        [_X, ("x2", [2, 4, 9, 9])],
        ["r"],
        1,
    ),
    "conv_clip_fed_bound": (
        [_CONV, helper.make_node("Clip", ["c", "zero", "high"], ["r"])],
        [_X, ("high", [])],
        ["r"],
        0,
    ),
}
_BOUNDS = [
    numpy_helper.from_array(np.array(0, np.float32), "zero"),
    numpy_helper.from_array(np.array(6, np.float32), "six"),
]


@pytest.mark.parametrize("name", sorted(RELU_GRAPHS))
def test_relu_fuses_where_it_alone_reads_a_fresh_output_and_matches_onnxruntime(name):
    nodes, inputs, outputs, expected_fused = RELU_GRAPHS[name]
    proto = _graph(nodes, inputs, outputs, _params(8, 4, 1, True) + _BOUNDS)
    # initializers nothing reads are harmless to both runtimes
    assert _fused_pairs(proto, fusion.fuse_relu) == expected_fused
    feeds = {n: np.asarray(RNG.standard_normal(shape) * 3, np.float32) for n, shape in inputs}
    kept = {n: a.copy() for n, a in feeds.items()}
    session = opconv.prepare(opconv.load(proto))
    theirs = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for _ in range(2):
        ours = session.run(feeds)
        for n in feeds:
            np.testing.assert_array_equal(feeds[n], kept[n], err_msg=f"feed {n} was overwritten")
        for out, expected in zip(outputs, theirs):
            np.testing.assert_allclose(ours[out], expected, rtol=1e-4, atol=1e-5, err_msg=out)


def test_conv_batch_norm_relu_runs_as_one_step():
    nodes, inputs, outputs, _ = RELU_GRAPHS["conv_batch_norm"]
    session = opconv.prepare(opconv.load(_graph(nodes, inputs, outputs, _params(8, 4, 1, True))))
    plan = session._interpreter.plan(session.model.graph)
    labels = [step.label for step in plan.steps if step.node.op == "Conv"]
    assert len(labels) == 1 and "BatchNormalization" in labels[0] and "Relu" in labels[0], labels


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64])
def test_relu_kernel_is_numpy_maximum_bit_for_bit(dtype):
    # The Relu the fusion applies goes through the data against a row of zeros; the results must be numpy's
    # maximum(x, 0) to the bit: NaNs of either sign keep their payload, -0 and infinities as numpy leaves them
    # (float16 is computed in float32, as every element-wise kernel computes it).
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(12_345) * 100).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[rng.integers(0, x.size, 300)] = np.array([np.nan, -np.nan, -0.0, np.inf, -np.inf] * 60, dtype)

    def expected(a):
        return np.maximum(a.astype(np.float32) if dtype is np.float16 else a, 0).astype(dtype).view(np.uint8)

    for shape in [(12_345,), (3, 5, 823), (5, 2469)]:
        a = x.reshape(shape)
        got = elementwise.relu(a)
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got.view(np.uint8), expected(a))
        view = a[:, ::2] if a.ndim > 1 else a[::3]  # not contiguous
        np.testing.assert_array_equal(elementwise.relu(view).view(np.uint8), expected(view))
        into = a.copy()
        assert elementwise.relu(into, out=into) is into
        np.testing.assert_array_equal(into.view(np.uint8), expected(a))


# ---------------------------------------------------------------- channel shuffle into the next convolution


def _shuffle_model(*, strides=(1, 1), pads=(1, 1, 1, 1), back=(2, 12, 7, 6), extra_use=False, dilations=(1, 1)):
    """x (2, 12, 7, 6) -> Relu -> ShuffleNet's channel shuffle in 3 groups (Reshape, Transpose, Reshape to
    ``back``) -> a depthwise Conv with BatchNormalization (and a grouped Conv when ``back`` is not a plain
    shuffle's shape)."""
    channels = back[1]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["r", "split"], ["s"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "back"], ["u"]),
        helper.make_node(
            "Conv", ["u", "w"], ["c"], group=channels, pads=list(pads), strides=list(strides), dilations=list(dilations)
        ),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], epsilon=1e-3),
    ]
    outputs = ["y"] + (["r2"] if extra_use else [])
    if extra_use:  # a second reader of the Relu's output, after the Conv
        nodes.append(helper.make_node("Sigmoid", ["r"], ["r2"]))
    params = {
        "split": np.array([2, 3, 4, 7, 6], np.int64),
        "back": np.array(back, np.int64),
        "w": RNG.standard_normal((channels, 1, 3, 3)).astype(np.float32),
        "scale": RNG.uniform(0.5, 2, channels).astype(np.float32),
        "shift": RNG.standard_normal(channels).astype(np.float32),
        "mean": RNG.standard_normal(channels).astype(np.float32),
        "var": RNG.uniform(0.1, 3, channels).astype(np.float32),
    }
    graph = helper.make_graph(
        nodes,
        "shuffle",
        [helper.make_tensor_value_info("x", F, [2, 12, 7, 6])],
        [helper.make_tensor_value_info(n, F, None) for n in outputs],
        [numpy_helper.from_array(a, k) for k, a in params.items()],
    )
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"strides": (2, 2)},
        {"pads": (0, 2, 1, 0)},
        {"strides": (2, 1), "dilations": (2, 1), "pads": (2, 1, 2, 1)},
        {"back": (2, 6, 14, 6)},  # not the shuffle's shape: the Reshape reshapes as the node does
    ],
)
def test_channel_shuffle_is_copied_by_the_convolutions_padding_and_matches_onnxruntime(kwargs):
    proto = _shuffle_model(**kwargs)
    assert _fused_pairs(proto, fusion.fuse_channel_shuffle) == 1
    _compare(proto, {"x": RNG.standard_normal((2, 12, 7, 6)).astype(np.float32)})


def test_channel_shuffle_of_a_value_read_again_later_is_not_fused():
    proto = _shuffle_model(extra_use=True)
    assert _fused_pairs(proto, fusion.fuse_channel_shuffle) == 0
    _compare(proto, {"x": RNG.standard_normal((2, 12, 7, 6)).astype(np.float32)})

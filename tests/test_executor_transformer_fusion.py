"""The ONNX executor's transformer fusions (fusion.fuse_transformer_patterns): torch's exports of the erf and
tanh Gelus, attention's MatMul-Scale-Mask-Softmax-MatMul, a MatMul with its bias Add and LLaMA's RMSNorm each run
as one step.

Each fused graph is checked against onnxruntime and, bit for bit, against the same session without the
fusion; graphs that must not fuse (an inner value read elsewhere, another constant, a Relu already fused into
the Add) and an outside value overwritten in place between the fused nodes are checked too.
"""

from __future__ import annotations

import math
import os

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.dialects.onnx import fusion

RNG = np.random.default_rng(11)


def _scalar(name: str, value: float, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype), name)


def _model(nodes, inputs, outputs, initializers, elem=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, elem, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, elem, None) for n in outputs],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _erf_gelu(half_first: bool, half=0.5):
    """x -> Gelu(x) as torch exports it (x * (1 + erf(x / sqrt 2)) * 0.5, or with 0.5 * x first), after a
    Sigmoid so that x is a computed value."""
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["x"]),
        helper.make_node("Div", ["x", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["p"]),
    ]
    if half_first:
        nodes += [helper.make_node("Mul", ["half", "x"], ["h"]), helper.make_node("Mul", ["h", "p"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "p"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    constants = [_scalar("sqrt2", math.sqrt(2)), _scalar("one", 1), _scalar("half", half)]
    return nodes, constants


def _tanh_gelu():
    """GPT-2's gelu_new as torch exports it."""
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["x"]),
        helper.make_node("Mul", ["x", "half"], ["h"]),
        helper.make_node("Pow", ["x", "three"], ["c"]),
        helper.make_node("Mul", ["c", "k"], ["ck"]),
        helper.make_node("Add", ["x", "ck"], ["s"]),
        helper.make_node("Mul", ["s", "root"], ["t0"]),
        helper.make_node("Tanh", ["t0"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["p"]),
        helper.make_node("Mul", ["h", "p"], ["y"]),
    ]
    constants = [
        _scalar("half", 0.5),
        _scalar("three", 3),
        _scalar("k", 0.044715),
        _scalar("root", math.sqrt(2 / math.pi)),
        _scalar("one", 1),
    ]
    return nodes, constants


def _linear():
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["x"]),
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["bias", "m"], ["y"]),
    ]
    constants = [
        numpy_helper.from_array(RNG.standard_normal((16, 8)).astype(np.float32), "w"),
        numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "bias"),
    ]
    return nodes, constants


def _rms_norm(cast: bool):
    """LLaMA's RMSNorm as torch exports it: w * Cast(x * (1 / sqrt(mean(x^2, -1) + eps))), x read twice."""
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["x"]),
        helper.make_node("Pow", ["x", "two"], ["x2"]),
        helper.make_node("ReduceMean", ["x2"], ["ms"], axes=[-1]),
        helper.make_node("Add", ["ms", "eps"], ["mse"]),
        helper.make_node("Sqrt", ["mse"], ["rms"]),
        helper.make_node("Div", ["one", "rms"], ["inv"]),
        helper.make_node("Mul", ["x", "inv"], ["n"]),
    ]
    if cast:
        nodes.append(helper.make_node("Cast", ["n"], ["nc"], to=TensorProto.FLOAT))
    nodes.append(helper.make_node("Mul", ["w", "nc" if cast else "n"], ["y"]))
    constants = [
        _scalar("two", 2),
        _scalar("eps", 1e-6),
        _scalar("one", 1),
        numpy_helper.from_array(RNG.standard_normal(16).astype(np.float32), "w"),
    ]
    return nodes, constants


def _attention(mask: bool, divide: bool, cast: bool, sdpa: bool = False):
    """softmax(q k * scale [+ mask]) v over (batch, heads, sequence, width), k given transposed; ``sdpa``: as
    torch exports scaled_dot_product_attention (q and k each scaled, NaN weights of -inf rows zeroed)."""
    if sdpa:
        nodes = [
            helper.make_node("Mul", ["q", "root"], ["qs"]),
            helper.make_node("Mul", ["kt", "root"], ["ks"]),
            helper.make_node("MatMul", ["qs", "ks"], ["z"]),
        ]
    else:
        nodes = [
            helper.make_node("MatMul", ["q", "kt"], ["s"]),
            helper.make_node("Div" if divide else "Mul", ["s", "scale"], ["z"]),
        ]
    if mask:
        nodes.append(helper.make_node("Add", ["mask", "z"], ["zm"]))
    nodes.append(helper.make_node("Softmax", ["zm" if mask else "z"], ["p"], axis=-1))
    if sdpa:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "zero", "p"], ["pw"])]
    if cast:
        nodes.append(helper.make_node("Cast", ["p"], ["pc"], to=TensorProto.FLOAT))
    nodes.append(helper.make_node("MatMul", ["pc" if cast else "pw" if sdpa else "p", "v"], ["y"]))
    constants = (
        [_scalar("root", 0.125**0.5), _scalar("zero", 0)] if sdpa else [_scalar("scale", 8.0 if divide else 0.125)]
    )
    return nodes, constants


_ATTENTION_INPUTS = [("q", [2, 3, 5, 8]), ("kt", [2, 3, 8, 5]), ("v", [2, 3, 5, 8]), ("mask", [2, 1, 1, 5])]


def runs_with_and_without(model, feeds, pass_name: str, nothing_done):
    """(what the fusion pass ``pass_name`` of fusion.py returned, two runs' outputs with it (the second after
    the first run's folding), outputs with the pass replaced by one that does nothing and returns
    ``nothing_done``)."""
    returned = []
    fuse = getattr(fusion, pass_name)

    def spy(graph, plan):
        returned.append(fuse(graph, plan))
        return returned[-1]

    setattr(fusion, pass_name, spy)
    try:
        session = opconv.prepare(opconv.load(model))
        fused = [session.run(feeds) for _ in range(2)]
    finally:
        setattr(fusion, pass_name, fuse)
    setattr(fusion, pass_name, lambda graph, plan: nothing_done)
    try:
        plain = opconv.prepare(opconv.load(model)).run(feeds)
    finally:
        setattr(fusion, pass_name, fuse)
    return returned[0], fused, plain


def _counts_and_runs(proto, feeds):
    """(fusions per pattern, outputs with the fusion, outputs without it)."""
    return runs_with_and_without(proto, feeds, "fuse_transformer_patterns", {})


def _check_fuses_once(proto, feeds, pattern: str) -> None:
    """``pattern`` fuses once, and the fused runs give onnxruntime's ``y`` and the unfused bits."""
    counts, fused, plain = _counts_and_runs(proto, feeds)
    assert counts == {pattern: 1}
    (expected,) = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for run in fused:
        np.testing.assert_allclose(run["y"], expected, rtol=1e-5, atol=1e-6)
        assert np.array_equal(run["y"], plain["y"])


CASES = {
    "erf gelu": (_erf_gelu(False), "Gelu", 6),
    "erf gelu, 0.5 x first": (_erf_gelu(True), "Gelu", 6),
    "tanh gelu": (_tanh_gelu(), "Gelu (tanh)", 9),
    "matmul + bias": (_linear(), "MatMul + bias", 3),
    "rms norm": (_rms_norm(True), "RMSNorm", 8),
    "rms norm without the cast": (_rms_norm(False), "RMSNorm", 7),
}


# A row of -inf scores gives NaN weights (-inf - -inf), numpy's warning included, which the sdpa form zeroes.
@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
@pytest.mark.parametrize(
    "mask,divide,cast,sdpa",
    [(True, False, False, False), (True, True, True, False), (False, False, True, False), (True, False, False, True)],
)
def test_attention_fuses_and_matches_onnxruntime_and_the_unfused_bits(mask, divide, cast, sdpa):
    nodes, constants = _attention(mask, divide, cast, sdpa)
    inputs = _ATTENTION_INPUTS if mask else _ATTENTION_INPUTS[:3]
    proto = _model(nodes, inputs, ["y"], constants)
    feeds = {n: RNG.standard_normal(shape).astype(np.float32) for n, shape in inputs}
    if mask:  # the sdpa form's mask hides every key of one batch: its weights are NaN, zeroed
        hidden = np.float32(-np.inf if sdpa else -1e4)
        feeds["mask"] = np.where(RNG.random((2, 1, 1, 5)) < 0.3, hidden, np.float32(0))
        if sdpa:
            feeds["mask"][1] = hidden
    _check_fuses_once(proto, feeds, "Attention")


@pytest.mark.parametrize("name", sorted(CASES))
def test_pattern_fuses_and_matches_onnxruntime_and_the_unfused_bits(name):
    (nodes, constants), pattern, _ = CASES[name]
    proto = _model(nodes, [("a", [2, 3, 16])], ["y"], constants)
    feeds = {"a": (RNG.standard_normal((2, 3, 16)) * 4).astype(np.float32)}
    _check_fuses_once(proto, feeds, pattern)


def test_float16_is_left_to_the_kernels():
    (nodes, constants), _, _ = CASES["erf gelu"]
    constants = [_scalar(c.name, float(numpy_helper.to_array(c)), np.float16) for c in constants]
    proto = _model(nodes, [("a", [4, 16])], ["y"], constants, elem=TensorProto.FLOAT16)
    feeds = {"a": RNG.standard_normal((4, 16)).astype(np.float16)}
    counts, fused, _ = _counts_and_runs(proto, feeds)
    assert counts == {}
    (expected,) = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(fused[1]["y"].astype(np.float32), expected.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("variant", ["inner value returned", "other constant", "relu fused into the add"])
def test_what_must_not_fuse_is_left_alone(variant):
    outputs = ["y"]
    if variant == "other constant":
        nodes, constants = _erf_gelu(False, half=0.6)
    else:
        nodes, constants = _erf_gelu(False) if variant == "inner value returned" else _linear()
    if variant == "inner value returned":
        outputs.append("e")
    if variant == "relu fused into the add":
        nodes = nodes + [helper.make_node("Relu", ["y"], ["r"])]
        outputs = ["r"]
    proto = _model(nodes, [("a", [2, 3, 16])], outputs, constants)
    feeds = {"a": RNG.standard_normal((2, 3, 16)).astype(np.float32)}
    counts, fused, plain = _counts_and_runs(proto, feeds)
    assert counts == {}
    expected = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for name, value in zip(outputs, expected):
        np.testing.assert_allclose(fused[1][name], value, rtol=1e-5, atol=1e-6)


def test_a_value_the_fused_step_reads_is_not_overwritten_before_it_runs():
    # x is read by the MatMul, then (its last reader before the fusion) by an Add that may overwrite it;
    # fused, the MatMul runs at the bias Add, after that Add: x must live, unchanged, until then.
    nodes, constants = _linear()
    nodes = nodes[:2] + [helper.make_node("Add", ["x", "z"], ["s"])] + nodes[2:]
    proto = _model(nodes, [("a", [2, 3, 16]), ("z", [2, 3, 16])], ["y", "s"], constants)
    feeds = {
        "a": RNG.standard_normal((2, 3, 16)).astype(np.float32),
        "z": RNG.standard_normal((2, 3, 16)).astype(np.float32),
    }
    counts, fused, plain = _counts_and_runs(proto, feeds)
    assert counts == {"MatMul + bias": 1}
    expected = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for run in fused:
        for name, value in zip(["y", "s"], expected):
            np.testing.assert_allclose(run[name], value, rtol=1e-5, atol=1e-6)
            assert np.array_equal(run[name], plain[name])


def test_rms_norm_of_the_llama_export_takes_numpys_calls_and_gives_the_kernels_bits():
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "corpus", "llama_legacy_op17.onnx")
    stored = np.load(path[: -len(".onnx")] + ".npz")
    feeds = {k.split(":", 1)[1]: v for k, v in stored.items() if k.startswith("input:")}
    session = opconv.prepare(opconv.load(path))
    fast = [s.fn.fast for s in session._interpreter.plan(session.model.graph).steps if hasattr(s.fn, "fast")]
    assert fast and all(fast)
    runs = [session.run(feeds) for _ in range(2)]
    evaluators = dict(fusion._EVALUATORS)
    fusion._EVALUATORS.clear()  # every pattern through its nodes' kernels
    try:
        generic = opconv.prepare(opconv.load(path)).run(feeds)
    finally:
        fusion._EVALUATORS.update(evaluators)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for run in runs:
        for (name, value), theirs in zip(run.items(), expected):
            assert np.array_equal(value, generic[name])
            np.testing.assert_allclose(value, theirs, rtol=1e-4, atol=1e-5)


def _rotary(half: int, axis: int, cos_sin_fed: bool):
    """LLaMA's rotary embedding as torch exports it: x * cos + Concat(-x[..., half:], x[..., :half]) * sin."""
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["x"]),
        helper.make_node("Mul", ["x", "cos"], ["xc"]),
        helper.make_node("Slice", ["x", "zero", "half", "axis", "step"], ["x1"]),
        helper.make_node("Slice", ["x", "half", "end", "axis", "step"], ["x2"]),
        helper.make_node("Neg", ["x2"], ["n"]),
        helper.make_node("Concat", ["n", "x1"], ["r"], axis=axis),
        helper.make_node("Mul", ["r", "sin"], ["rs"]),
        helper.make_node("Add", ["xc", "rs"], ["y"]),
    ]
    bounds = {"zero": 0, "half": half, "end": 2**63 - 1, "axis": axis, "step": 1}
    constants = [numpy_helper.from_array(np.array([v], np.int64), k) for k, v in bounds.items()]
    angles = RNG.standard_normal((1, 1, 5, 16)).astype(np.float32)
    tables = {"cos": np.cos(angles), "sin": np.sin(angles)}
    if not cos_sin_fed:
        constants += [numpy_helper.from_array(v, k) for k, v in tables.items()]
    return nodes, constants, tables


@pytest.mark.parametrize(
    "half,axis,cos_sin_fed", [(8, -1, False), (8, 3, True), (6, -1, False)]
)  # the last: no halves, the nodes' kernels
def test_rotary_embedding_fuses_and_matches_onnxruntime_and_the_unfused_bits(half, axis, cos_sin_fed):
    nodes, constants, tables = _rotary(half, axis, cos_sin_fed)
    inputs = [("a", [2, 3, 5, 16])] + ([("cos", [1, 1, 5, 16]), ("sin", [1, 1, 5, 16])] if cos_sin_fed else [])
    proto = _model(nodes, inputs, ["y"], constants)
    feeds = {"a": RNG.standard_normal((2, 3, 5, 16)).astype(np.float32)} | (tables if cos_sin_fed else {})
    _check_fuses_once(proto, feeds, "Rotary")

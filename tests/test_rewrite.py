"""The pattern-rewrite engine (opconv.converters.rewrite), proved on ONNX -> ONNX rewrites.

Every numeric test runs the rewritten model with opconv's executor and compares
with onnxruntime on the *original* model (an oracle opconv did not write); the
rewritten model must also pass onnx's own checker.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import opconv
from opconv.converters.rewrite import (
    Builder,
    Match,
    Pattern,
    Refuse,
    Rule,
    RuleSet,
    apply,
    constant_value,
    convert_graph,
)
from opconv.dialects.onnx.io import to_proto
from opconv.errors import ConversionError, GraphError

F = TensorProto.FLOAT
OPSET = 17


def make_model(nodes, inputs, outputs, initializers=()):
    """An ONNX opset-17 model; ``inputs``/``outputs`` are (name, shape) pairs of float tensors."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
        initializer=list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def init(name, array):
    return onnx.numpy_helper.from_array(np.asarray(array, np.float32), name)


def oracle(proto, feeds):
    """onnxruntime's outputs for ``proto``, by output name."""
    sess = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def assert_same_numerics(proto, model, feeds, *, exact=True):
    """``model`` (rewritten) run by opconv equals onnxruntime on ``proto`` (original); names kept too."""
    onnx.checker.check_model(to_proto(model), full_check=True)
    expected = oracle(proto, feeds)
    got = opconv.run(model, feeds)
    assert list(got) == list(expected)  # graph output names and order preserved
    for name, want in expected.items():
        if exact:
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], want, rtol=2e-6, atol=1e-7, err_msg=name)


def ops(graph):
    return [n.op for n in graph.nodes]


# -- rules used by the tests ---------------------------------------------------------------


def relu(op, x):
    return op.Relu(x)


def relu_to_max(b: Builder, m: Match):
    zero = b.const(np.zeros((), dtype=np.float32), "zero")
    return b.Max(m["x"], zero)


RELU = Rule("relu-to-max", relu, relu_to_max)


def matmul_add(op, x, w, bias):
    return op.Add(op.MatMul(x, w, _name="mm"), bias, _commute=True)


def gemm_shapes(m: Match) -> str | None:
    shapes = {k: m[k].shape for k in ("x", "w", "bias")}
    if shapes["x"] is None or len(shapes["x"]) != 2 or shapes["w"] is None or len(shapes["w"]) != 2:
        return f"MatMul operands are not rank 2 ({shapes['x']}, {shapes['w']})"
    if shapes["bias"] is None or len(shapes["bias"]) != 1:
        return f"bias {m['bias'].name!r} is not 1-D (shape {shapes['bias']})"
    return None


def to_gemm(b: Builder, m: Match):
    return b.Gemm(m["x"], m["w"], m["bias"], _name=m.node("mm").name + "_gemm")


GEMM = Rule("matmul-add-to-gemm", matmul_add, to_gemm, check=gemm_shapes)


# -- one-to-one / decomposition -----------------------------------------------------------


def test_decomposition_relu_to_max_keeps_numerics_and_output_name():
    proto = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", [2, 3])], [("y", [2, 3])])
    model = opconv.load(proto)
    report = apply(model.graph, RuleSet([RELU]))
    assert ops(model.graph) == ["Max"]
    assert report.fired == {"relu-to-max": 1} and report.unmatched == []
    assert model.graph.outputs[0].name == "y" and model.graph.outputs[0].producer.op == "Max"
    node = model.graph.nodes[0]
    assert (node.domain, node.version) == ("", OPSET)  # builder kept the root's dialect
    x = np.array([[-1, 0, 2], [3, -4, -0.5]], np.float32)
    assert_same_numerics(proto, model, {"x": x})


# -- fusion with a check ---------------------------------------------------------------------


def _mm_add_model(bias_shape, *, swap=False, extra_consumer=False):
    add_inputs = ["b", "mm"] if swap else ["mm", "b"]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
        helper.make_node("Add", add_inputs, ["y"], name="add"),
    ]
    outputs = [("y", [2, 4])]
    if extra_consumer:
        nodes.append(helper.make_node("Neg", ["mm"], ["z"], name="neg"))
        outputs.append(("z", [2, 4]))
    rng = np.random.default_rng(0)
    inits = [init("w", rng.standard_normal((3, 4))), init("b", rng.standard_normal(bias_shape))]
    return make_model(nodes, [("x", [2, 3])], outputs, inits)


@pytest.mark.parametrize("swap", [False, True], ids=["Add(MatMul,b)", "Add(b,MatMul)"])
def test_fusion_matmul_add_to_gemm_commutative(swap):
    proto = _mm_add_model([4], swap=swap)
    model = opconv.load(proto)
    report = apply(model.graph, [GEMM])
    assert ops(model.graph) == ["Gemm"] and report.fired == {"matmul-add-to-gemm": 1}
    assert model.graph.outputs[0].name == "y"
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    assert_same_numerics(proto, model, {"x": x}, exact=False)


def test_fusion_check_refuses_with_reason_in_report():
    proto = _mm_add_model([2, 4])  # a 2-D bias: Gemm would accept it, the rule's check does not
    model = opconv.load(proto)
    report = apply(model.graph, [GEMM])
    assert ops(model.graph) == ["MatMul", "Add"] and not report.fired
    reasons = {u.label: u.reasons for u in report.unmatched}
    assert reasons["node 'add' (Add)"] == ["matmul-add-to-gemm: bias 'b' is not 1-D (shape (2, 4))"]
    assert reasons["node 'matmul' (MatMul)"] == ["no rule for MatMul"]
    assert "bias 'b' is not 1-D" in str(report)


def test_intermediate_with_another_consumer_does_not_fire():
    proto = _mm_add_model([4], extra_consumer=True)
    model = opconv.load(proto)
    report = apply(model.graph, [GEMM])
    assert sorted(ops(model.graph)) == ["Add", "MatMul", "Neg"] and not report.fired
    (reason,) = report.reasons_for(model.graph.nodes[ops(model.graph).index("Add")])
    assert reason.startswith("matmul-add-to-gemm: pattern does not match")
    assert "'mm'" in reason and "other consumers" in reason and "'neg'" in reason


def test_shared_intermediate_may_fire_and_is_kept():
    def pattern(op, x, w, bias):
        return op.Add(op.MatMul(x, w, _name="mm", _shared=True), bias)

    proto = _mm_add_model([4], extra_consumer=True)
    model = opconv.load(proto)
    apply(model.graph, [Rule("shared", pattern, to_gemm, check=gemm_shapes)])
    assert sorted(ops(model.graph)) == ["Gemm", "MatMul", "Neg"]
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    assert_same_numerics(proto, model, {"x": x}, exact=False)


def test_attribute_predicate_and_constant_capture():
    def leaky(op, x):
        return op.LeakyRelu(x, alpha=lambda a: a is not None and 0 < a < 1)

    def to_max(b, m):  # max(x, alpha*x) == LeakyRelu for 0 < alpha < 1
        alpha = b.const(np.float32(m.root.attr("alpha")), "alpha")
        return b.Max(m["x"], b.Mul(m["x"], alpha))

    proto = make_model(
        [
            helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.25),
            helper.make_node("LeakyRelu", ["y"], ["z"], alpha=2.0),
        ],
        [("x", [5])],
        [("z", [5])],
    )
    model = opconv.load(proto)
    report = apply(model.graph, [Rule("leaky", leaky, to_max)])
    assert ops(model.graph) == ["Mul", "Max", "LeakyRelu"]
    assert "alpha=2.0 does not match" in report.unmatched[0].reasons[0]
    alpha = next(n for n in model.graph.nodes if n.op == "Mul").inputs[1]
    assert constant_value(alpha) == np.float32(0.25)
    assert_same_numerics(proto, model, {"x": np.array([-2, -1, 0, 1, 2], np.float32)})


# -- multi-output nodes ------------------------------------------------------------------------


def split2(op, x, sizes):
    return op.Split(x, sizes, axis=1, _outputs=2)


def split_to_slices(b: Builder, m: Match):
    sizes = m.constant("sizes")
    if sizes is None:
        raise Refuse("split sizes are not constant")
    axes = b.const(np.array([1], np.int64), "axes")
    cut = int(sizes[0])
    first = b.Slice(m["x"], b.const(np.array([0], np.int64)), b.const(np.array([cut], np.int64)), axes)
    second = b.Slice(
        m["x"], b.const(np.array([cut], np.int64)), b.const(np.array([cut + int(sizes[1])], np.int64)), axes
    )
    return [first, second]


def test_multi_output_node_replaced_by_two_nodes():
    proto = make_model(
        [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1), helper.make_node("Neg", ["b"], ["nb"])],
        [("x", [2, 5])],
        [("a", [2, 2]), ("nb", [2, 3])],
        [onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "sizes")],
    )
    model = opconv.load(proto)
    report = apply(model.graph, [Rule("split", split2, split_to_slices)])
    assert report.fired == {"split": 1}
    assert sorted(ops(model.graph)) == ["Neg", "Slice", "Slice"]
    assert "sizes" not in model.graph.initializers  # the constant only the Split used is gone
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    assert_same_numerics(proto, model, {"x": x})


def test_replacement_may_refuse_and_graph_is_untouched():
    proto = make_model(
        [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)],
        [("x", [2, 5]), ("sizes", [2])],
        [("a", [2, 2]), ("b", [2, 3])],
    )
    proto.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    model = opconv.load(proto)
    before = len(model.graph.initializers)
    report = apply(model.graph, [Rule("split", split2, split_to_slices)])
    assert ops(model.graph) == ["Split"] and len(model.graph.initializers) == before
    assert report.unmatched[0].reasons == ["split: split sizes are not constant"]


# -- graph outputs -------------------------------------------------------------------------------


def test_graph_output_replaced_by_graph_input_needs_identity():
    def add_zero(op, x, z):
        return op.Add(x, z)

    def drop(b, m):
        if not np.all(m.constant("z") == 0):
            raise Refuse("not adding zero")
        return m["x"]

    proto = make_model(
        [helper.make_node("Add", ["x", "z"], ["y"])], [("x", [3])], [("y", [3])], [init("z", np.zeros(3))]
    )
    model = opconv.load(proto)
    report = apply(model.graph, [Rule("add-zero", add_zero, drop)])
    assert ops(model.graph) == ["Add"]
    assert "graph output 'y' would be replaced by 'x'" in report.unmatched[0].reasons[0]

    model = opconv.load(proto)
    apply(model.graph, [Rule("add-zero", add_zero, drop)], identity=lambda b, v: b.Identity(v))
    assert ops(model.graph) == ["Identity"] and model.graph.outputs[0].name == "y"
    assert_same_numerics(proto, model, {"x": np.array([1, -2, 3], np.float32)})


def test_output_used_inside_and_as_graph_output():
    proto = make_model(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["y"], ["z"])],
        [("x", [4])],
        [("y", [4]), ("z", [4])],
    )
    model = opconv.load(proto)
    apply(model.graph, [RELU])
    assert ops(model.graph) == ["Max", "Neg"]
    assert model.graph.nodes[1].inputs[0] is model.graph.outputs[0]
    assert_same_numerics(proto, model, {"x": np.array([-1, 2, -3, 4], np.float32)})


# -- subgraphs -----------------------------------------------------------------------------------


def _if_model():
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"], name="then_relu")],
        "then",
        [],
        [helper.make_tensor_value_info("t", F, [3])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Relu", ["n"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", F, [3])],
    )
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)
    proto = make_model([node], [("x", [3])], [("y", [3])])
    proto.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    return proto


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_are_rewritten(cond):
    proto = _if_model()
    model = opconv.load(proto)
    report = apply(model.graph, [RELU])
    assert report.fired == {"relu-to-max": 2}
    if_node = model.graph.nodes[0]
    assert ops(if_node.attr("then_branch")) == ["Max"] and ops(if_node.attr("else_branch")) == ["Neg", "Max"]
    assert if_node.attr("then_branch").outputs[0].name == "t"
    assert_same_numerics(proto, model, {"x": np.array([-1, 0, 5], np.float32), "c": np.array(cond)})


def test_not_recursive_leaves_subgraphs():
    model = opconv.load(_if_model())
    report = apply(model.graph, [RELU], recursive=False)
    assert not report.fired and ops(model.graph.nodes[0].attr("then_branch")) == ["Relu"]


# -- cross-dialect conversion ----------------------------------------------------------------


def test_convert_graph_lists_every_unconverted_node():
    """A toy 'target dialect' (domain 'toy'): Relu maps, Neg has no rule, a 2-D-bias fusion is refused."""
    relu_rule = Rule("relu", relu, lambda b, m: b.ToyRelu(m["x"]))
    gemm_rule = Rule("gemm", matmul_add, lambda b, m: b.ToyGemm(m["x"], m["w"], m["bias"]), check=gemm_shapes)
    proto = _mm_add_model([2, 4])
    proto.graph.node.extend(
        [helper.make_node("Relu", ["y"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["out"], name="neg")]
    )
    proto.graph.output.append(helper.make_tensor_value_info("out", F, [2, 4]))
    model = opconv.load(proto)
    with pytest.raises(ConversionError) as info:
        convert_graph(model.graph, [gemm_rule, relu_rule], "toy", 1)
    err = info.value
    labels = [p.label for p in err.problems]
    assert sorted(labels) == ["node 'add' (Add)", "node 'matmul' (MatMul)", "node 'neg' (Neg)"]
    text = str(err)
    assert text.startswith("3 node(s) cannot be converted to toy version 1")
    assert "gemm: bias 'b' is not 1-D" in text and "no rule for Neg" in text and "no rule for MatMul" in text
    assert "ToyRelu" in ops(model.graph)  # what could be converted was


def test_convert_graph_succeeds_when_everything_maps():
    rules = [Rule("relu", relu, lambda b, m: b.ToyRelu(m["x"]))]
    model = opconv.load(make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [1])], [("y", [1])]))
    graph, report = convert_graph(model.graph, rules, "toy", 1)
    assert [(n.op, n.domain, n.version) for n in graph.nodes] == [("ToyRelu", "toy", 1)]
    assert report.fired == {"relu": 1} and graph.outputs[0].name == "y"


# -- construction errors ---------------------------------------------------------------------


def test_pattern_and_ruleset_errors():
    with pytest.raises(GraphError, match="names used twice"):
        Pattern(lambda op, x: op.Neg(x, _name="x"))
    with pytest.raises(GraphError, match="must return the output"):
        Pattern(lambda op, x: x)
    with pytest.raises(GraphError, match="rule names used twice"):
        RuleSet([RELU, RELU])
    bad = Rule("bad", relu, lambda b, m: [m["x"], m["x"]])
    model = opconv.load(make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [1])], [("y", [1])]))
    with pytest.raises(GraphError, match="returned 2 values for 1 outputs"):
        apply(model.graph, [bad])


def test_commutative_pattern_binds_repeated_capture_consistently():
    square = Rule("square", lambda op, x: op.Mul(x, x), lambda b, m: b.Pow(m["x"], b.const(np.float32(2))))
    proto = make_model(
        [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Mul", ["sq", "x"], ["y"])],
        [("x", [3])],
        [("y", [3])],
    )
    model = opconv.load(proto)
    report = apply(model.graph, [square])
    assert report.fired == {"square": 1} and sorted(ops(model.graph)) == ["Mul", "Pow"]
    assert "'x' would bind two different values" in report.unmatched[0].reasons[0]
    assert_same_numerics(proto, model, {"x": np.array([1, -2, 3], np.float32)})


# -- property: decompositions keep numerics ----------------------------------------------------


def _const(b, value):
    return b.const(np.array(value, np.float32), "c")


DECOMPOSE = RuleSet(
    [
        RELU,
        Rule("neg-to-sub", lambda op, x: op.Neg(x), lambda b, m: b.Sub(_const(b, 0), m["x"])),
        Rule("abs-to-max", lambda op, x: op.Abs(x), lambda b, m: b.Max(m["x"], b.Neg(m["x"]))),
        Rule(
            "sigmoid-to-exp",
            lambda op, x: op.Sigmoid(x),
            lambda b, m: b.Reciprocal(b.Add(_const(b, 1), b.Exp(b.Neg(m["x"])))),
        ),
        Rule("sub-to-add-neg", lambda op, x, y: op.Sub(x, y), lambda b, m: b.Add(m["x"], b.Neg(m["y"]))),
    ]
)

_UNARY = ["Relu", "Neg", "Abs", "Sigmoid"]
_BINARY = ["Sub", "Add", "Mul"]


@st.composite
def chains(draw):
    """A chain of elementwise ops; binary ops take the previous value and x or a constant."""
    length = draw(st.integers(1, 8))
    steps = [
        (draw(st.sampled_from(_UNARY + _BINARY)), draw(st.sampled_from(["x", "k", "prev"]))) for _ in range(length)
    ]
    return steps, draw(st.integers(0, 2**16))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_property_decomposition_keeps_outputs(case):
    steps, seed = case
    nodes, prev = [], "x"
    for i, (op, other) in enumerate(steps):
        out = f"v{i}"
        inputs = [prev] if op in _UNARY else [prev, prev if other == "prev" else other]
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{i}"))
        prev = out
    rng = np.random.default_rng(seed)
    proto = make_model(nodes, [("x", [4, 3])], [(prev, [4, 3])], [init("k", rng.standard_normal((3,)))])
    model = opconv.load(proto)
    report = apply(model.graph, DECOMPOSE)
    assert not set(ops(model.graph)) & {"Relu", "Abs", "Sigmoid"}  # (Neg and Sub reappear in replacements)
    assert sum(report.fired.values()) == sum(op in {"Relu", "Neg", "Abs", "Sigmoid", "Sub"} for op, _ in steps)
    x = rng.standard_normal((4, 3)).astype(np.float32) * 3
    assert_same_numerics(proto, model, {"x": x}, exact=False)


def test_fusion_wins_over_one_to_one_rule_for_its_producer():
    """Consumers are visited first, so Add's fusion claims the MatMul before MatMul's own rule runs."""
    matmul = Rule(
        "matmul", lambda op, x, w: op.MatMul(x, w), lambda b, m: b.Einsum(m["x"], m["w"], equation="ij,jk->ik")
    )
    proto = _mm_add_model([4])
    proto.graph.node.append(helper.make_node("MatMul", ["y", "w2"], ["out"], name="matmul2"))
    proto.graph.initializer.append(init("w2", np.eye(4)))
    proto.graph.output[0].CopyFrom(helper.make_tensor_value_info("out", F, [2, 4]))
    model = opconv.load(proto)
    report = apply(model.graph, [matmul, GEMM])
    assert report.fired == {"matmul": 1, "matmul-add-to-gemm": 1}
    assert ops(model.graph) == ["Gemm", "Einsum"]
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    assert_same_numerics(proto, model, {"x": x}, exact=False)

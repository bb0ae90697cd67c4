"""The graph core: builder, use lists, rewiring, topological order, names, lazy tensors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opconv.errors import GraphError
from opconv.ir import Graph, Node, Tensor, Value, infer_attr, outer_references
from opconv.types import TensorType


def _chain():
    g = Graph("g")
    x = g.add_input("x", TensorType("float32", (2, 3)))
    w = g.const(np.ones((3, 4), np.float32), "w")
    y = g.op("MatMul", x, w)
    z = g.op("Relu", y)
    g.outputs.append(z)
    return g, x, w, y, z


def test_builder_wires_producers_and_uses():
    g, x, w, y, z = _chain()
    assert y.producer.op == "MatMul" and z.producer.inputs == [y]
    assert [n.op for n in x.consumers()] == ["MatMul"]
    assert w.const.numpy().shape == (3, 4)


def test_replace_all_uses_and_remove_node():
    g, x, w, y, z = _chain()
    relu = z.producer
    with pytest.raises(GraphError, match="is used by"):
        g.remove_node(y.producer)
    relu.set_input(0, x)
    assert y.uses == [] and (relu, 0) in x.uses
    g.remove_node(y.producer)
    assert [n.op for n in g.nodes] == ["Relu"]


def test_topological_sort_is_stable_and_detects_cycles():
    g, x, w, y, z = _chain()
    g.nodes.reverse()
    g.topological_sort()
    assert [n.op for n in g.nodes] == ["MatMul", "Relu"]
    a, b = Value("a"), Value("b")
    g2 = Graph("cyclic")
    g2.add_node(Node("Neg", [a], [b], name="n1"))
    g2.add_node(Node("Neg", [b], [a], name="n2"))
    with pytest.raises(GraphError, match="cycle"):
        g2.topological_sort()


def test_subgraph_outer_references_order_the_owner():
    g = Graph("main")
    cond = g.add_input("cond", TensorType("bool", ()))
    x = g.add_input("x", TensorType("float32", (2,)))
    body = Graph("then", parent=g)
    body_out = Value("body_out")
    late = Value("late")
    body.add_node(Node("Identity", [late], [body_out]))
    body.outputs.append(body_out)
    if_node = Node("If", [cond], [Value("r")], attrs={"then_branch": infer_attr("then_branch", body)})
    g.add_node(if_node)
    g.add_node(Node("Neg", [x], [late]))  # defined after its use inside the subgraph
    assert outer_references(body) == [late]
    g.topological_sort()
    assert [n.op for n in g.nodes] == ["Neg", "If"]


def test_unique_names_cover_outer_scopes():
    g, *_ = _chain()
    sub = Graph("sub", parent=g)
    assert sub.unique_name("x") != "x"
    assert g.unique_name("fresh") == "fresh" and g.unique_name("fresh") != "fresh"


def test_tensor_loads_lazily_once():
    calls = []

    def loader():
        calls.append(1)
        return np.zeros((2, 2), np.float32)

    t = Tensor("float32", (2, 2), loader=loader)
    assert not t.is_loaded and t.nbytes == 16
    t.numpy(), t.numpy()
    assert calls == [1]
    t.release()
    assert not t.is_loaded


def test_tensor_shape_mismatch_is_an_error():
    t = Tensor("float32", (3,), loader=lambda: np.zeros(4, np.float32))
    with pytest.raises(GraphError, match="declared"):
        t.numpy()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 1_000), min_size=1, max_size=40))
def test_topological_sort_any_permutation(order):
    # A chain of n nodes shuffled by `order` always sorts back into the chain.
    g = Graph("chain")
    v = g.add_input("in")
    nodes = []
    for i in range(len(order)):
        out = Value(f"v{i}")
        nodes.append(Node("Neg", [v], [out], name=f"n{i}"))
        v = out
    for n in sorted(nodes, key=lambda n: order[int(n.name[1:])]):
        g.add_node(n)
    g.topological_sort()
    assert [n.name for n in g.nodes] == [f"n{i}" for i in range(len(order))]


def test_infer_attr_types():
    assert infer_attr("a", 3).type == "int"
    assert infer_attr("a", [1.0, 2]).type == "floats"
    assert infer_attr("a", ["x"]).type == "strings"
    assert infer_attr("a", np.zeros(2)).type == "tensor"
    with pytest.raises(GraphError):
        infer_attr("a", object())


def _cases_with_subgraphs():
    from opconv import testdata

    wanted = (
        "test_if",
        "test_loop11",
        "test_loop16_seq_none",
        "test_scan9_sum",
        "test_range_float_type_positive_delta_expanded",
    )
    return [c for c in testdata.node_cases() if c.name in wanted]


@pytest.mark.parametrize("case", _cases_with_subgraphs(), ids=lambda c: c.name)
def test_graph_copy_runs_like_the_source_and_shares_only_constants(case):
    """A copy (subgraphs reading outer values included) computes ONNX's expected outputs, even after the
    source graph is emptied: no node or value of the copy is the source's, its constant tensors are."""
    import opconv
    from opconv.compare import compare_arrays

    model = opconv.load(case.path or case.load_model())
    source = model.graph
    copy = source.copy()
    source_values = {id(v) for n in source.walk() for v in n.outputs + n.inputs if v is not None}
    assert not source_values & {id(v) for n in copy.walk() for v in n.outputs + n.inputs if v is not None}
    assert not {id(n) for n in source.walk()} & {id(n) for n in copy.walk()}
    for name, v in source.initializers.items():
        assert copy.initializers[name].const is v.const
    assert len(list(copy.walk())) == len(list(source.walk())) > len(copy.nodes)  # the subgraphs were copied
    source.nodes, source.initializers = [], {}
    model.graph = copy
    names = [v.name for v in copy.outputs]
    for index, (_, expected) in enumerate(case.datasets):
        actual = opconv.run(model, case.feeds(index))
        for name, e in zip(names, expected):
            cmp = compare_arrays(name, e, actual[name])
            assert cmp.ok, cmp.message

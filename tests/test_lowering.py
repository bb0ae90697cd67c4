"""The lowering registry's dispatch: version ranges, input/output counts, fusions before single-node translators.

The routes of opconv's converters are exercised by their own suites (node cases, corpus); this file checks the
registry's rules on a private route so that a change to dispatch shows here first.
"""

import pytest

from opconv.converters import lowering
from opconv.converters.rewrite import convert_graph
from opconv.errors import ConversionError, GraphError
from opconv.ir import Graph, Node, Value
from opconv.types import TensorType

SRC, DST = "test-src", "test-dst"
F32 = TensorType("float32", (2,))


@lowering.lower(SRC, DST, "Neg", since=1, inputs=1)
def _neg_1(b, m):
    return b.op("Old", m.root.inputs[0])


@lowering.lower(SRC, DST, "Neg", since=6, inputs=1, names=("x",))
def _neg_6(b, m):
    return b.op("New", m["x"])


@lowering.lower(SRC, DST, ("Add", "Sub"), inputs=2, check=lambda m: "no Sub" if m.root.op == "Sub" else None)
def _binary(b, m):
    return b.op("Bin", *m.root.inputs)


@lowering.fusion(SRC, DST, "neg-of-neg", lambda op, x: op.Neg(op.Neg(x)))
def _double_neg(b, m):
    return b.op("Copy", m["x"])


def _graph(*ops_and_versions):
    g = Graph("g")
    v = g.add_input("x", F32)
    y = g.add_input("y", F32)
    for i, (op, version) in enumerate(ops_and_versions):
        out = Value(f"v{i}", F32)
        g.add_node(Node(op, [v, y] if op in ("Add", "Sub") else [v], [out], domain="", version=version))
        v = out
    g.outputs = [v]
    return g


def _ops(g):
    return [n.op for n in g.nodes]


@pytest.mark.parametrize("version, expected", [(1, "Old"), (5, "Old"), (6, "New"), (13, "New")])
def test_highest_since_not_above_the_node_version(version, expected):
    g = _graph(("Neg", version))
    convert_graph(g, lowering.rule_set(SRC, DST), "dst", 1)
    assert _ops(g) == [expected]


def test_a_fusion_goes_before_the_single_node_translators():
    g = _graph(("Neg", 6), ("Neg", 6))
    convert_graph(g, lowering.rule_set(SRC, DST), "dst", 1)
    assert _ops(g) == ["Copy"]


def test_refusals_name_the_count_and_the_check():
    g = _graph(("Sub", 1))
    with pytest.raises(ConversionError, match="no Sub"):
        convert_graph(g, lowering.rule_set(SRC, DST), "dst", 1)
    g = _graph(("Neg", 0))
    with pytest.raises(ConversionError, match="no translator for version 0"):
        convert_graph(g, lowering.rule_set(SRC, DST), "dst", 1)


def test_one_registration_per_op_and_version():
    with pytest.raises(GraphError, match="two test-src->test-dst translators for Neg-6"):
        lowering.lower(SRC, DST, "Neg", since=6)(lambda b, m: None)
    assert [t.since for t in lowering.translators(SRC, DST) if t.op == "Neg"] == [1, 6]
    assert lowering.find(SRC, DST, "Neg", 7).fn is _neg_6
    assert lowering.find_exact(SRC, DST, "Neg", 6).fn is _neg_6
    assert lowering.find(SRC, DST, "Neg", 0) is None

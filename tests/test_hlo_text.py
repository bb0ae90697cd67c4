"""The HLO text format (opconv/dialects/hlo/text.py) and HLO files (io.py).

Round trips are checked on the graph itself (names, types, attributes, regions, constant bytes), not on
the printed text alone; hand-written modules are checked against values numpy computes from the same
literals; hostile inputs must raise ModelReadError with file:line:column and leave nothing written.
"""

from __future__ import annotations

import math
import os
import re
import struct
import sys
import tempfile
import types

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opconv
from opconv.cli import cli
from opconv.dialects.hlo import text as hlo_text
from opconv.dialects.hlo.build import hlo_node
from opconv.dialects.hlo.io import load, save
from opconv.dialects.hlo.text import HloParseError, parse_module, print_module
from opconv.errors import ModelReadError, ModelWriteError
from opconv.ir import Attr, Graph, Model, Node, Tensor, Value
from opconv.schemas import dialect_schemas
from opconv.types import ELEMENT_TYPES, TensorType, TupleType, type_signature

# ---------------------------------------------------------------------------
# comparing graphs exactly
# ---------------------------------------------------------------------------


def _float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _tensor_key(t: Tensor | None):
    if t is None:
        return None
    array = np.asarray(t.numpy())
    data = tuple(array.reshape(-1).tolist()) if t.dtype == "string" else np.ascontiguousarray(array).tobytes()
    return (t.dtype, t.shape, str(array.dtype), data)


def _attr_key(a: Attr):
    if a.type == "region":
        return _graph_key(a.value)
    if a.type == "tensor":
        return _tensor_key(a.value)
    if a.type == "float":
        return _float_bits(a.value)
    if isinstance(a.value, list):
        return tuple(a.value)
    return (type(a.value).__name__, a.value)


def _graph_key(g: Graph):
    inputs = {id(v) for v in g.inputs}
    return (
        g.name,
        [(v.name, v.type, _tensor_key(v.const)) for v in g.inputs],
        sorted((name, v.type, _tensor_key(v.const)) for name, v in g.initializers.items() if id(v) not in inputs),
        [
            (
                n.op,
                n.domain,
                n.version,
                n.name,
                [None if v is None else v.name for v in n.inputs],
                [None if v is None else (v.name, v.type) for v in n.outputs],
                sorted((k, a.type, _attr_key(a)) for k, a in n.attrs.items()),
            )
            for n in g.nodes
        ],
        [v.name for v in g.outputs],
    )


def _model_key(m: Model):
    return (m.dialect, m.opsets, m.producer, m.producer_version, m.doc, m.metadata, _graph_key(m.graph))


def _round_trip(m: Model) -> Model:
    """print -> parse, asserting the graph survives and that printing the result gives the same text."""
    first = print_module(m)
    back = parse_module(first)
    assert _model_key(back) == _model_key(m)
    assert print_module(back) == first
    return back


def _tt(dtype, *shape):
    return TensorType(dtype, tuple(shape))


def _model(g: Graph, **fields) -> Model:
    return Model(g, "hlo", {"": 1}, **fields)


def _identity_region(name: str, parent: Graph, t: TensorType) -> Graph:
    r = Graph(name, parent=parent)
    p = r.add_input(f"{name}_p", t)
    r.outputs = [p]
    return r


# ---------------------------------------------------------------------------
# programmatically built modules
# ---------------------------------------------------------------------------


def _loop_model() -> Model:
    """While with cond/body reading an outer value, If with both branches, Map, Sort, tuples."""
    g = Graph("loop")
    n = g.add_input("n", _tt("int32"))
    x = g.add_input("x", _tt("float32", 4))
    one = g.const(np.array(1, np.int32), "one")

    cond = Graph("cond", parent=g)
    ci, _ = cond.add_input("ci", _tt("int32")), cond.add_input("cx", _tt("float32", 4))
    lt = hlo_node(cond, "Compare", ci, n, comparison_direction="LT")
    lt.type = _tt("bool")
    cond.outputs = [lt]
    body = Graph("body", parent=g)
    bi, bx = body.add_input("bi", _tt("int32")), body.add_input("bx", _tt("float32", 4))
    nxt = hlo_node(body, "Add", bi, one)
    nxt.type = _tt("int32")
    twice = hlo_node(body, "Add", bx, bx)
    twice.type = _tt("float32", 4)
    body.outputs = [nxt, twice]
    i, acc = hlo_node(g, "While", one, x, _outputs=2, cond=cond, body=body)
    i.type, acc.type = _tt("int32"), _tt("float32", 4)

    pred = hlo_node(g, "Compare", i, n, comparison_direction="EQ")
    pred.type = _tt("bool")
    then = Graph("then", parent=g)
    neg = hlo_node(then, "Neg", acc)
    neg.type = _tt("float32", 4)
    then.outputs = [neg]
    other = Graph("else-branch", parent=g)  # a region graph name that differs from its attribute name
    other.outputs = [acc]
    chosen = hlo_node(g, "If", pred, true_branch=then, false_branch=other)
    chosen.type = _tt("float32", 4)

    comp = Graph("computation", parent=g)
    a, b = comp.add_input("a", _tt("float32")), comp.add_input("b", _tt("float32"))
    mx = hlo_node(comp, "Max", a, b)
    mx.type = _tt("float32")
    comp.outputs = [mx]
    mapped = hlo_node(g, "Map", chosen, acc, dimensions=[0], computation=comp)
    mapped.type = _tt("float32", 4)

    keys, idx = hlo_node(
        g,
        "Sort",
        mapped,
        g.const(np.arange(4, dtype=np.int32), "iota"),
        _outputs=2,
        dimension=0,
        descending=True,
        is_stable=True,
    )
    keys.type, idx.type = _tt("float32", 4), _tt("int32", 4)
    tup = hlo_node(g, "Tuple", keys, idx)
    tup.type = TupleType((keys.type, idx.type))
    first = hlo_node(g, "GetTupleElement", tup, index=0)
    first.type = keys.type
    g.outputs = [i, first, tup]
    return _model(
        g,
        producer="opconv",
        producer_version="0.1.0",
        doc='a "loop"\nwith regions',
        metadata={"source": "test", "ünïcode": "✓"},
    )


def test_round_trip_regions_and_tuples():
    m = _loop_model()
    back = _round_trip(m)
    text = print_module(m)
    assert "cond(%ci: s32[], %cx: f32[4]) -> (pred[]) {" in text
    assert 'false_branch "else-branch"() -> (f32[4]) {' in text
    assert "%Tuple_3: (f32[4], s32[4]) = Tuple(%Sort_out0, %Sort_out1)" in text
    # region parameters and outer references resolve to the right values
    while_node = next(n for n in back.graph.nodes if n.op == "While")
    cond = while_node.attrs["cond"].value
    compare = cond.nodes[0]
    assert compare.inputs[0] is cond.inputs[0]
    assert compare.inputs[1] is back.graph.inputs[0]
    assert cond.parent is back.graph
    assert type_signature(back.graph.outputs[2].type) == "tuple(tensor(float32),tensor(int32))"


def test_every_attribute_type():
    g = Graph("attrs")
    x = g.add_input("x", _tt("float32", 2, 3))
    cat = hlo_node(g, "Concatenate", x, x, dimension=-1)  # int
    tr = hlo_node(g, "Transpose", cat, permutation=[1, 0])  # ints
    gelu = hlo_node(g, "Gelu", tr, approximate=False)  # bool
    cmp = hlo_node(g, "Compare", gelu, gelu, comparison_direction="GE")  # string
    leaky = hlo_node(g, "LeakyRelu", x, alpha=float("nan"))  # float, special values below
    elu = hlo_node(g, "Elu", x, alpha=-0.0)
    hs = hlo_node(g, "HardSigmoid", x, slope=float("-inf"), offset=1e-300)
    pr = hlo_node(
        g,
        "PartialReduce",
        x,
        g.const(np.zeros(3, np.int32), "idx"),
        _outputs=2,
        size=1,
        comparator=_identity_region("comparator", g, _tt("float32")),
        recall_target=0.1,
        op_name='top "k"',
        aggregate_to_topk=True,
    )
    small = hlo_node(g, "Constant", value=Tensor.from_array(np.array([1.5, -0.0, np.inf], np.float32)))
    large = hlo_node(g, "Constant", value=Tensor.from_array(np.linspace(-1, 1, 40).astype(np.float64)))
    g.outputs = [cmp, leaky, elu, hs, *pr, small, large]
    m = _model(g)
    back = _round_trip(m)
    attrs = {n.op: n.attrs for n in back.graph.nodes}
    assert attrs["Concatenate"]["dimension"] == Attr("dimension", "int", -1)
    assert attrs["Transpose"]["permutation"].value == [1, 0]
    assert attrs["Gelu"]["approximate"].value is False
    assert math.isnan(attrs["LeakyRelu"]["alpha"].value)
    assert math.copysign(1.0, attrs["Elu"]["alpha"].value) == -1.0
    assert attrs["HardSigmoid"]["offset"].value == 1e-300
    assert attrs["PartialReduce"]["op_name"].value == 'top "k"'


def test_large_constants_go_to_the_sidecar(tmp_path):
    m = _loop_model()
    g = m.graph
    weights = np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45, 3.4028235e38] * 5, np.float32)
    weights.view(np.uint32)[6] = 0x7FC00123  # a NaN with a payload
    big = g.const(weights, "big")
    half = g.const(np.array([65504, -0.0, np.nan, 6e-8] * 5, np.float16), "half")
    brain = g.const(np.array([1e38, -0.0, np.nan, 0.1] * 5, ml_dtypes.bfloat16), "brain")
    g.outputs += [big, half, brain]
    path = tmp_path / "m.hlo"
    save(m, path)
    assert sorted(os.listdir(tmp_path)) == ["m.hlo", "m.hlo.weights"]
    text = path.read_text()
    assert 'weights="m.hlo.weights"' in text.splitlines()[0]
    assert "const %big = f32[30] weights(offset=0, length=120)" in text
    assert "const %half = f16[20] weights(offset=128, length=40)" in text  # 64-byte aligned
    back = load(path)
    assert back.graph.initializers["big"].const.is_loaded is False  # mapped on first use only
    assert _model_key(back) == _model_key(m)
    assert back.graph.initializers["big"].const.numpy().view(np.uint32)[6] == 0x7FC00123
    # saving the loaded model over itself keeps the bytes (the mapped data outlives the rename)
    save(back, path)
    assert _model_key(load(path)) == _model_key(m)


@pytest.mark.parametrize("dtype", sorted(hlo_text.SHORT_NAMES))
@pytest.mark.parametrize("count", [5, 40])
def test_every_dtype_inline_and_sidecar(dtype, count, tmp_path):
    et = ELEMENT_TYPES[dtype]
    rng = np.random.default_rng(len(dtype) * count)
    if dtype == "string":
        array = np.array([f's{i}\n"' for i in range(count)], dtype=object)
    elif dtype == "bool":
        array = rng.integers(0, 2, count).astype(bool)
    elif et.is_int:
        info = ml_dtypes.iinfo(et.numpy) if et.bits < 8 else np.iinfo(et.numpy)
        array = rng.integers(
            int(info.min), int(info.max), count, endpoint=True, dtype=np.int64 if dtype != "uint64" else np.uint64
        ).astype(et.numpy)
    elif et.bits < 8:
        array = (rng.integers(0, 256, count, dtype=np.uint8) & ((1 << et.bits) - 1)).view(et.numpy)
    else:  # every bit pattern: NaN payloads, infinities, -0.0, subnormals
        array = rng.integers(0, 256, count * et.numpy.itemsize, dtype=np.uint8).view(et.numpy)
    g = Graph("dtypes")
    v = g.const(array, "c")
    g.outputs = [v]
    m = _model(g)
    if dtype != "string":
        _round_trip(m)
    save(m, tmp_path / "m.hlo")
    on_disk = sorted(os.listdir(tmp_path))
    assert on_disk == (["m.hlo", "m.hlo.weights"] if count > 16 and dtype != "string" else ["m.hlo"])
    back = load(tmp_path / "m.hlo")
    assert _model_key(back) == _model_key(m)
    text = (tmp_path / "m.hlo").read_text()
    assert f"const %c = {hlo_text.SHORT_NAMES[dtype]}[{count}]" in text


def test_names_needing_quoting():
    g = Graph("my model/v1")
    x = g.add_input("input:0 with spaces", TensorType("float32", ("batch", None, "n-m", 3)))
    y = g.add_input("", TensorType("float32", None))  # empty name, unknown rank
    z = g.add_input("ok.name-1$", None)  # unknown type
    c = g.const(np.array([1, 2], np.int64), 'quote"back\\slash\nnewline\ttab\u0001\u2603')
    node = Node("Add", [x, x], [Value("résultat ✓", None)], domain="", version=1, name="")
    g.add_node(node)
    unnamed = Node("Neg", [y], [Value("%neg", TensorType(None, (2,)))], domain="", version=1, name="neg node")
    g.add_node(unnamed)
    lonely = Node("Relu", [z], [Value("r", None)], domain="", version=1, name="r")  # name = output: implicit
    g.add_node(lonely)
    slashes = [g.const(np.array(i, np.int8), name) for i, name in enumerate(["conv1/w", "a//b", "end/"])]
    g.outputs = [node.outputs[0], unnamed.outputs[0], c, lonely.outputs[0], *slashes]
    m = _model(g)
    back = _round_trip(m)
    text = print_module(m)
    assert 'HloModule "my model/v1"' in text
    assert '%"input:0 with spaces": f32[batch,?,"n-m",3]' in text
    assert '%"": f32[*]' in text and "%ok.name-1$: ?" in text
    assert 'node "": %"résultat ✓" = Add(' in text
    assert back.graph.nodes[0].name == "" and back.graph.nodes[2].name == "r"
    assert 'return %"résultat ✓", %"%neg", %"quote' in text
    assert text.rstrip().endswith('%conv1/w, %"a//b", %end/\n}')


def test_optional_inputs_and_outputs_and_parameter_defaults():
    g = Graph("opt")
    x = g.add_input("x", _tt("float32", 1, 3, 4, 4))
    scales = g.const(np.array([1, 1, 2, 2], np.float32), "scales")
    resized = Node("Resize", [x, None, scales], [Value("up", _tt("float32", 1, 3, 8, 8))], version=1, name="up")
    g.add_node(resized)
    norm = Node("LayerNorm", [x, x, x], [Value("ln", x.type), None, Value("rstd", None)], version=1, name="ln")
    g.add_node(norm)
    w = g.add_initializer("w", Tensor.from_array(np.ones((2,), np.float32)))
    g.inputs.append(w)  # a parameter with a default value
    g.outputs = [resized.outputs[0], norm.outputs[0], norm.outputs[2], w]
    text = print_module(_model(g))
    assert "%up: f32[1,3,8,8] = Resize(%x, _, %scales)" in text
    assert "%ln: f32[1,3,4,4], _, %rstd = LayerNorm(%x, %x, %x)" in text
    assert "%w: f32[2] = f32[2] {1.0, 1.0}" in text
    _round_trip(_model(g))


def _sample_attr(spec, parent: Graph):
    if spec.allowed:
        return spec.allowed[0]
    return {
        "int": 1,
        "ints": [0, 1],
        "float": 0.25,
        "bool": True,
        "string": "add",
        "tensor": Tensor.from_array(np.array([[1.5, -0.0]], np.float32)),
        "region": _identity_region(spec.name, parent, _tt("float32", 2, 3)),
    }[spec.type]


@pytest.mark.parametrize("schema", list(dialect_schemas("hlo")), ids=lambda s: s.name)
def test_every_schema_op_prints_and_parses(schema):
    assert len(list(dialect_schemas("hlo"))) == 141
    g = Graph("op")
    x = g.add_input("x", _tt("float32", 2, 3))
    inputs = [x] * min(max(schema.min_inputs, 1), schema.max_inputs)
    attrs = {p.name: _sample_attr(p, g) for p in schema.attributes if p.required}
    outs = min(max(schema.min_outputs, 1), schema.max_outputs)
    result = hlo_node(g, schema.name, *inputs, _outputs=outs, **attrs)
    results = result if isinstance(result, list) else [result]
    for v in results:
        v.type = _tt("float32", 2, 3)
    g.outputs = results
    _round_trip(_model(g))


# ---------------------------------------------------------------------------
# random graphs (hypothesis)
# ---------------------------------------------------------------------------

_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "int32", "int64", "uint8", "bool", "complex64"]
_UNARY = ["Abs", "Neg", "Exp", "Tanh", "Copy", "Relu", "Not", "Sign"]
_BINARY = ["Add", "Sub", "Div", "Max", "Min", "Pow", "And", "Xor"]


@st.composite
def _value_types(draw, depth=0):
    kind = draw(st.sampled_from(["tensor", "tensor", "tensor", "none", "tuple"] if depth < 2 else ["tensor"]))
    if kind == "none":
        return None
    if kind == "tuple":
        return TupleType(tuple(draw(st.lists(_value_types(depth + 1), max_size=3))))
    dims = st.one_of(st.integers(0, 9), st.none(), st.text(min_size=1, max_size=4))
    shape = draw(st.one_of(st.none(), st.tuples(), st.lists(dims, max_size=4).map(tuple)))
    return TensorType(draw(st.sampled_from(_DTYPES)), shape)


@st.composite
def _arrays(draw):
    dtype = draw(st.sampled_from(_DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    count = int(np.prod(shape, dtype=np.int64))
    np_dtype = ELEMENT_TYPES[dtype].numpy
    if dtype == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=count, max_size=count)), bool).reshape(shape)
    raw = draw(st.binary(min_size=count * np_dtype.itemsize, max_size=count * np_dtype.itemsize))
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape).copy()


_NAMES = st.text(max_size=6)


@st.composite
def _graphs(draw, names=None, parent=None, depth=0):
    if names is None:  # one pool for the whole module: a region's names never hide outer ones
        names = iter(draw(st.lists(_NAMES, min_size=120, max_size=120, unique=True)))
    g = Graph(draw(_NAMES), parent=parent)
    values = [g.add_input(next(names), draw(_value_types())) for _ in range(draw(st.integers(0 if parent else 1, 3)))]
    for _ in range(draw(st.integers(0, 3))):
        values.append(g.const(draw(_arrays()), next(names)))
    if parent is not None:
        values += list(parent.values())[:2]  # outer-scope reads
    if not values:
        values.append(g.add_input(next(names), None))
    for _ in range(draw(st.integers(0, 5))):
        choice = draw(st.integers(0, 5 if depth == 0 else 4))
        pick = st.sampled_from(values)
        attrs: dict = {}
        if choice == 0:
            op, inputs = draw(st.sampled_from(_UNARY)), [draw(pick)]
        elif choice == 1:
            op, inputs = draw(st.sampled_from(_BINARY)), [draw(pick), draw(pick)]
        elif choice == 2:
            op, inputs = "Transpose", [draw(pick)]
            attrs["permutation"] = Attr(
                "permutation", "ints", draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4))
            )
        elif choice == 3:
            op, inputs = "Constant", []
            attrs["value"] = Attr("value", "tensor", Tensor.from_array(draw(_arrays())))
        elif choice == 4:
            op, inputs = "Sort", [draw(pick)]
            attrs["descending"] = Attr("descending", "bool", draw(st.booleans()))
            attrs["dimension"] = Attr("dimension", "int", draw(st.integers(-(2**63), 2**63 - 1)))
            if draw(st.booleans()):
                op, attrs = "LeakyRelu", {"alpha": Attr("alpha", "float", draw(st.floats()))}
            elif draw(st.booleans()):
                op, attrs = (
                    "Compare",
                    {"comparison_direction": Attr("comparison_direction", "string", draw(st.text(max_size=5)))},
                )
                inputs.append(draw(pick))
        else:
            op, inputs = "If", [draw(pick)]
            for branch in ("true_branch", "false_branch"):
                attrs[branch] = Attr(branch, "region", draw(_graphs(names, g, depth + 1)))
        outputs = [Value(next(names), draw(_value_types()))]
        node_name = draw(st.one_of(st.just(outputs[0].name), _NAMES))
        g.add_node(Node(op, inputs, outputs, domain="", version=1, name=node_name, attrs=attrs))
        values += outputs
    g.outputs = draw(st.lists(st.sampled_from(values), max_size=3))
    return g


@settings(
    max_examples=int(os.environ.get("OPCONV_HYPOTHESIS_EXAMPLES", 60)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_graphs(), st.text(max_size=5))
def test_random_graphs_round_trip(g, producer):
    m = _model(g, producer=producer)
    _round_trip(m)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "r.hlo")
        save(m, path, inline_limit=3)  # most constants go to the sidecar
        assert _model_key(load(path)) == _model_key(m)


# ---------------------------------------------------------------------------
# hand-written text: values checked against numpy
# ---------------------------------------------------------------------------

_HAND = """// a hand-written module
HloModule hand, producer="me"

func @main(%x: f32[3]) -> (f32[3], f64[2], bf16[2], c64[2], pred[2]) {
  const %c = f32[3] {0.1, -0.0, nan}
  const %d = f64[2] {1e-320, -inf}
  const %b = bf16[2] {0.1, nan(0x7fc1)}
  const %z = c64[2] {(1.5, -2), (0.0, inf)}
  const %p = pred[2] {true, false}
  %y: f32[3] = Add(%x, %c)  // trailing comment
  return %y, %d, %b, %z, %p
}
"""


def test_hand_written_literals_match_numpy():
    m = parse_module(_HAND)
    consts = {k: v.const.numpy() for k, v in m.graph.initializers.items()}
    expected = np.array([0.1, -0.0, np.nan], np.float32)
    assert consts["c"].tobytes() == expected.tobytes()
    assert consts["d"].tobytes() == np.array([1e-320, -np.inf]).tobytes()
    assert consts["b"].view(np.uint16).tolist() == [int(np.array(0.1, ml_dtypes.bfloat16).view(np.uint16)), 0x7FC1]
    assert consts["z"].tolist() == [complex(1.5, -2), complex(0, np.inf)]
    assert consts["p"].tolist() == [True, False]
    assert m.producer == "me" and m.graph.name == "hand"
    assert m.graph.nodes[0].name == "y" and m.graph.outputs[0].type == _tt("float32", 3)
    assert opconv.check(m) == []


# ---------------------------------------------------------------------------
# errors: line and column, hostile inputs
# ---------------------------------------------------------------------------


def _module(body: str, params: str = "%x: f32[2]", results: str = "f32[2]") -> str:
    return f"HloModule m\nfunc @main({params}) -> ({results}) {{\n{body}\n}}\n"


@pytest.mark.parametrize(
    "text, line, column, message",
    [
        (_module("  %y: f32[2] = Bogus(%x)\n  return %y"), 3, 16, "unknown HLO operation 'Bogus'"),
        (
            _module('  %y: f32[4] = Concatenate(%x, %x) {dimension="0"}\n  return %y', results="f32[4]"),
            3,
            47,
            "attribute Concatenate.dimension is an int: expected an integer",
        ),
        (_module("  %y: f32[2] = Sort(%x) {descending=1}\n  return %y"), 3, 37, "expected true or false"),
        (_module("  %y: f32[2] = Abs(%x) {axis=1}\n  return %y"), 3, 25, "Abs has no attribute 'axis'"),
        (_module("  %y: f32[2] = Abs(%q)\n  return %y"), 3, 20, "%q is not defined before this use"),
        (_module("  %x: f32[2] = Abs(%x)\n  return %x"), 3, 3, "%x is already defined on line 2"),
        (_module("  const %c = u8[2] {1, 300}\n  return %x"), 3, 24, "300 is out of range for u8"),
        (_module("  const %c = f32[3] {1, 2}\n  return %x"), 3, 21, "constant of 3 element(s) lists 2"),
        (_module("  %y: f32[2] = Abs(%x)\n  return %y", results="f32[3]"), 2, 28, "declares f32[3]"),
        (_module("  %y: q32[2] = Abs(%x)\n  return %y"), 3, 7, "unknown element type 'q32'"),
        (_module("  %y: f32[2] = Abs(%x"), 4, 1, "expected ','"),
        (_module('  %y: f32[2] = CustomCall(%x) {call_target_name="oops}\n  return %y'), 3, 49, "unterminated string"),
        (_module("  %y: f32[2] = While(%x) {cond=1}\n  return %y"), 3, 27, "'cond' is a region"),
        ("HloModule m\nfunc @other() -> () {\n  return\n}\n", 2, 6, "exactly one, @main"),
        ("HloModel m\n", 1, 1, "expected 'HloModule'"),
        (_module("  return %x", params="%x: f32[1000000,1000000,1000000,1000000]"), 2, 16, "absurd shape"),
        (_module("  return %x", params="%x: " + "(" * 100 + "f32[2]" + ")" * 100), 2, 80, "nest deeper than 64"),
        (_module("  const %c = f32[2] weights(offset=0, length=8)\n  return %c"), 3, 21, "needs a weights file"),
    ],
)
def test_parse_errors_name_line_and_column(text, line, column, message):
    with pytest.raises(HloParseError) as info:
        parse_module(text, where="m.hlo")
    e = info.value
    assert isinstance(e, ModelReadError)
    assert message in e.message, e.message
    assert (e.file, e.line, e.column) == ("m.hlo", line, column), str(e)
    assert str(e).startswith(f"m.hlo:{line}:{column}: ")


def _sidecar_module(location: str, offset: int = 0, length: int = 80, shape: str = "20") -> str:
    return (
        f'HloModule m, weights="{location}"\nfunc @main() -> (f32[{shape}]) {{\n'
        f"  const %w = f32[{shape}] weights(offset={offset}, length={length})\n  return %w\n}}\n"
    )


@pytest.mark.parametrize(
    "location, offset, length, shape, message",
    [
        ("../outside.bin", 0, 80, "20", "lies outside the module's folder"),
        ("/etc/passwd", 0, 80, "20", "must be a relative path"),
        ("link.bin", 0, 80, "20", "lies outside the module's folder"),
        ("missing.bin", 0, 80, "20", "does not exist"),
        ("m.hlo.weights", 16, 80, "20", "bytes 16..96 lie outside 'm.hlo.weights' (80 bytes)"),
        ("m.hlo.weights", 0, 40, "20", "40 bytes stored, 80 expected"),
        ("m.hlo.weights", 0, 80, "100000000,100000000,1000000", "absurd shape"),
    ],
)
def test_hostile_sidecars_are_refused(tmp_path, location, offset, length, shape, message):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 80)
    (folder / "m.hlo.weights").write_bytes(b"\0" * 80)
    os.symlink(tmp_path / "outside.bin", folder / "link.bin")
    path = folder / "m.hlo"
    path.write_text(_sidecar_module(location, offset, length, shape))
    before = sorted(os.listdir(folder))
    with pytest.raises(ModelReadError) as info:
        opconv.load(path)
    assert message in str(info.value)
    assert re.match(re.escape(str(path)) + r":[123]:\d+: ", str(info.value)), str(info.value)
    out = tmp_path / "out.npz"
    result = CliRunner().invoke(cli, ["run", str(path), "-o", str(out)])
    assert result.exit_code == 2 and message in result.output
    assert not out.exists() and sorted(os.listdir(folder)) == before


def test_unreadable_files(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_bytes(b"HloModule m\xff\n")
    with pytest.raises(ModelReadError, match="not UTF-8"):
        opconv.load(bad)
    with pytest.raises(ModelReadError, match="does not read it"):
        opconv.load(tmp_path / "x.mlir")
    sniffed = tmp_path / "model.txt"  # no suffix: recognised by content
    sniffed.write_text("// comment\n\n" + _HAND.split("\n", 1)[1])
    assert opconv.load(sniffed).graph.name == "hand"


# ---------------------------------------------------------------------------
# saving: refusals write nothing
# ---------------------------------------------------------------------------


def _unsavable_models():
    def graph():
        g = Graph("bad")
        g.add_input("x", _tt("float32", 20))
        g.const(np.zeros(40, np.float32), "first")  # written to the sidecar before the failure
        return g

    g1 = graph()
    g1.add_node(Node("Bogus", [g1.inputs[0]], [Value("y")], version=1))
    g2 = graph()
    g2.add_node(Node("Sort", [g2.inputs[0]], [Value("y")], version=1, attrs=[Attr("descending", "int", 1)]))
    g3 = graph()
    g3.add_node(Node("Abs", [Value("ghost")], [Value("y")], version=1))
    g4 = graph()
    g4.add_initializer("liar", Tensor("float32", (20,), array=np.zeros(20, np.float64)))
    g5 = graph()
    g5.add_node(Node("Abs", [g5.inputs[0]], [Value("x")], version=1))  # two values named x
    return [
        (g1, "not an operation of the HLO dialect"),
        (g2, "the schema of Sort declares a bool"),
        (g3, "reads 'ghost', which is not defined"),
        (g4, "declared float32 but holds float64"),
        (g5, "are named 'x'"),
    ]


@pytest.mark.parametrize("index", range(5))
def test_refused_saves_write_nothing(tmp_path, index):
    g, message = _unsavable_models()[index]
    (tmp_path / "m.hlo").write_text("previous contents")
    with pytest.raises(ModelWriteError, match=message):
        opconv.save(_model(g), tmp_path / "m.hlo")
    assert os.listdir(tmp_path) == ["m.hlo"]
    assert (tmp_path / "m.hlo").read_text() == "previous contents"


def test_save_refuses_other_dialects_and_formats(tmp_path):
    m = _loop_model()
    with pytest.raises(ModelWriteError, match="unknown HLO format"):
        save(m, tmp_path / "m.hlo", format="json")
    m.dialect = "onnx"
    with pytest.raises(ModelWriteError):
        save(m, tmp_path / "m.hlo")
    assert os.listdir(tmp_path) == []


def test_stablehlo_format_calls_the_exporter(tmp_path, monkeypatch):
    seen = []
    fake = types.ModuleType("opconv.dialects.hlo.stablehlo")
    fake.export = lambda model: seen.append(model) or "module {\n}\n"
    monkeypatch.setitem(sys.modules, "opconv.dialects.hlo.stablehlo", fake)
    m = _loop_model()
    opconv.save(m, tmp_path / "m.mlir")
    save(m, tmp_path / "other.txt", format="stablehlo")
    assert seen == [m, m]
    assert (tmp_path / "m.mlir").read_text() == "module {\n}\n"
    assert sorted(os.listdir(tmp_path)) == ["m.mlir", "other.txt"]

    def broken(model):
        raise ModelWriteError("cannot export")

    fake.export = broken
    with pytest.raises(ModelWriteError, match="cannot export"):
        opconv.save(m, tmp_path / "new.mlir")
    assert sorted(os.listdir(tmp_path)) == ["m.mlir", "other.txt"]


# ---------------------------------------------------------------------------
# the CLI: inspect, check, run
# ---------------------------------------------------------------------------


def _dense_model() -> Model:
    g = Graph("dense")
    x = g.add_input("x", _tt("float32", 2, 20))
    w = g.const(np.random.default_rng(0).standard_normal((20, 3)).astype(np.float32), "w")
    y = hlo_node(g, "DotGeneral", x, w, lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
    y.type = _tt("float32", 2, 3)
    r = hlo_node(g, "Relu", y)
    r.type = y.type
    g.outputs = [r]
    return _model(g)


def test_cli_inspect_check_and_run(tmp_path):
    m = _dense_model()
    path = tmp_path / "m.hlo"
    opconv.save(m, path)
    runner = CliRunner()
    result = runner.invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "hlo model" in result.output and "x: float32[2,20]" in result.output
    assert "weights: 240 bytes in 1 constants" in result.output
    result = runner.invoke(cli, ["check", str(path)])
    assert result.exit_code == 0 and "valid" in result.output

    x = np.random.default_rng(1).standard_normal((2, 20)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    result = runner.invoke(cli, ["run", str(path), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "o.npz")])
    assert result.exit_code == 0, result.output
    w = m.graph.initializers["w"].const.numpy()
    with np.load(tmp_path / "o.npz") as out:
        np.testing.assert_allclose(out[m.graph.outputs[0].name], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)

    # a module missing a required attribute parses, and `check` reports it with the node's name
    text = path.read_text().replace("lhs_contracting_dimensions=[1], ", "")
    (tmp_path / "bad.hlo").write_text(text)
    (tmp_path / "bad.hlo.weights").write_bytes((tmp_path / "m.hlo.weights").read_bytes())
    text = text.replace('weights="m.hlo.weights"', 'weights="bad.hlo.weights"')
    (tmp_path / "bad.hlo").write_text(text)
    result = runner.invoke(cli, ["check", str(tmp_path / "bad.hlo")])
    assert result.exit_code == 1
    assert "required attribute 'lhs_contracting_dimensions'" in result.output


def test_the_documented_example_parses(tmp_path):
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "hlo-dialect.md"), encoding="utf-8").read()
    example = doc.split("## A complete example\n\n```\n", 1)[1].split("```", 1)[0]
    (tmp_path / "loop.hlo").write_text(example)
    weights = np.arange(24, dtype=np.float32)
    (tmp_path / "loop.hlo.weights").write_bytes(weights.tobytes())
    m = opconv.load(tmp_path / "loop.hlo")
    assert opconv.check(m) == []
    assert m.graph.initializers["w"].const.numpy().tolist() == weights.reshape(2, 3, 4).tolist()
    assert [n.name for n in m.graph.nodes if n.op == "If"] == ["choose"]
    assert m.graph.outputs[2].type == TupleType((_tt("float32", 4), _tt("int32", 4)))
    _round_trip(m)

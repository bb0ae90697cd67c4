"""The version converter's protobuf path (opconv/converters/onnx_versions/proto_path.py).

It converts only the nodes that change and copies the rest; its results must hold the same nodes as
converting the whole model in the graph core (``driver.convert_version``), pass onnx.checker, and
compute what the source computes: onnxruntime runs both on seeded random inputs.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.converters import lowering
from opconv.converters.onnx_versions import convert_proto, driver, proto_path
from opconv.converters.onnx_versions.registry import upgrade
from opconv.dialects.onnx.io import to_proto

from .test_version_converter import make_model, tensor

pytestmark = pytest.mark.slow  # a long sweep: the full suite runs it, `-m "not slow"` skips it

RNG = np.random.default_rng(11)


def whole_model_way(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    return to_proto(driver.convert_version(opconv.load(model), opset, source_proto=model))


def node_fields(n: onnx.NodeProto) -> tuple:
    """A node by the values of its fields (a field set to "" and one left unset are alike)."""
    attrs = []
    for a in n.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, onnx.TensorProto):
            v = (v.data_type, tuple(v.dims), numpy_helper.to_array(v).tobytes())
        attrs.append((a.name, a.type, a.ref_attr_name, repr(v)))
    return n.op_type, n.domain, tuple(n.input), tuple(n.output), n.name, tuple(sorted(attrs))


def parts(m: onnx.ModelProto):
    """Nodes, initializers, graph inputs/outputs and opsets; node order and value_info aside."""
    g = m.graph
    return (
        sorted(map(node_fields, g.node)),
        sorted((t.name, t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes()) for t in g.initializer),
        [v.name for v in g.input],
        [v.name for v in g.output],
        sorted((o.domain, o.version) for o in m.opset_import),
        m.ir_version,
    )


def ort_outputs(model: onnx.ModelProto, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def converted_in_place(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """The protobuf path's result, which must be taken (no fallback) and equal the whole-model way's."""
    result = proto_path.convert(model, opset)
    assert result is not None, proto_path.FALLBACKS
    onnx.checker.check_model(result, full_check=True)
    assert parts(result) == parts(whole_model_way(model, opset))
    return result


def node_case_targets():
    """(case name, model, targets) for every node case with an ai.onnx opset: one opset down, and 21."""
    from opconv.testdata import node_cases

    for case in node_cases():
        model = case.load_model()
        source = next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), None)
        if source is not None:
            yield case.name, model, {max(source - 1, 1), 21} - {source}


def test_node_cases_convert_to_the_same_nodes_both_ways():
    """Every node case one opset down and to 21: the same nodes as the whole-model way, or both refuse."""
    taken = differ = 0
    for name, model, targets in node_case_targets():
        for target in targets:
            try:
                expected = parts(whole_model_way(model, target))
            except opconv.OpconvError:
                expected = None
            result = proto_path.convert(model, target)
            if result is None:
                continue  # the caller converts the whole model: nothing to compare
            taken += 1
            if expected is None or parts(result) != expected:
                differ += 1
                assert differ < 5, f"{name} -> {target}"
    assert differ == 0
    assert taken > 2000  # measured 3,0xx: most cases take this path


def test_untouched_and_worked_nodes_read_each_other():
    """Relu/Add/Mul stay, Clip/Unsqueeze/Upsample/Dropout change; graph outputs come from both kinds."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),  # untouched
        helper.make_node("Clip", ["r"], ["c"], min=-0.5, max=0.5),  # worked, reads untouched
        helper.make_node("Add", ["c", "r"], ["a"]),  # untouched, reads worked
        helper.make_node("Unsqueeze", ["a"], ["u"], axes=[0]),  # worked
        helper.make_node("Squeeze", ["u"], ["s"], axes=[0]),  # worked, reads worked
        helper.make_node("Upsample", ["s", "scales"], ["up"], mode="nearest"),  # replaced by Resize
        helper.make_node("Dropout", ["up"], ["d"], ratio=0.3),  # worked
        helper.make_node("Mul", ["d", "up"], ["y"]),  # untouched, graph output
    ]
    m = make_model(
        nodes,
        [tensor("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [tensor("y", TensorProto.FLOAT, [1, 2, 6, 8]), tensor("c", TensorProto.FLOAT, [1, 2, 3, 4])],
        9,
        [scales],
    )
    up = converted_in_place(m, 21)
    assert [n.op_type for n in up.graph.node] == [
        "Relu",
        "Clip",
        "Add",
        "Unsqueeze",
        "Squeeze",
        "Resize",
        "Dropout",
        "Mul",
    ]
    assert up.graph.node[0] == m.graph.node[0]  # copied as it was
    down = converted_in_place(up, 13)
    x = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    expected = ort_outputs(m, {"x": x})
    for converted in (up, down):
        for e, a in zip(expected, ort_outputs(converted, {"x": x})):
            np.testing.assert_array_equal(a, e)


def test_decompositions_are_written_in_place_in_order():
    """Gelu-20 and LayerNormalization-17 downgraded become several nodes each, between untouched ones."""
    scale = numpy_helper.from_array(RNG.uniform(0.5, 1.5, 6).astype(np.float32), "scale")
    bias = numpy_helper.from_array(RNG.uniform(-0.5, 0.5, 6).astype(np.float32), "bias")
    nodes = [
        helper.make_node("Neg", ["x"], ["n"]),
        helper.make_node("Gelu", ["n"], ["g"]),
        helper.make_node("Abs", ["g"], ["a"]),
        helper.make_node("LayerNormalization", ["a", "scale", "bias"], ["l"], axis=-1, epsilon=1e-5),
        helper.make_node("Sigmoid", ["l"], ["y"]),
    ]
    m = make_model(
        nodes, [tensor("x", TensorProto.FLOAT, [2, 6])], [tensor("y", TensorProto.FLOAT, [2, 6])], 20, [scale, bias]
    )
    down = converted_in_place(m, 16)
    ops = [n.op_type for n in down.graph.node]
    assert ops[0] == "Neg" and ops[-1] == "Sigmoid" and "Gelu" not in ops and "LayerNormalization" not in ops
    assert ops.index("Abs") > ops.index("Erf")  # Gelu's decomposition in its place, before its reader
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(ort_outputs(down, {"x": x})[0], ort_outputs(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_negative_axes_are_counted_from_the_rank_below_opset_11():
    nodes = [
        helper.make_node("Concat", ["x", "x"], ["c"], axis=-1),
        helper.make_node("Flatten", ["c"], ["f"], axis=-1),
        helper.make_node("ArgMax", ["f"], ["y"], axis=-1, keepdims=0),
    ]
    m = make_model(nodes, [tensor("x", TensorProto.FLOAT, [2, 3, 4])], [tensor("y", TensorProto.INT64, [6])], 13)
    down = converted_in_place(m, 10)
    assert [a.i for n in down.graph.node for a in n.attribute if a.name == "axis"] == [2, 2, 1]
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_outputs(down, {"x": x})[0], ort_outputs(m, {"x": x})[0])


def test_defaults_that_changed_are_written_out():
    """Selu-6's alpha/gamma defaults differ from Selu-1's (the spec's 1.6732632..., 1.0507009...)."""
    m = make_model(
        [helper.make_node("Selu", ["x"], ["y"])],
        [tensor("x", TensorProto.FLOAT, [3])],
        [tensor("y", TensorProto.FLOAT, [3])],
        6,
    )
    down = converted_in_place(m, 5)
    attrs = {a.name: a.f for a in down.graph.node[0].attribute}
    assert attrs == pytest.approx({"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875})


def test_shape_inference_waits_for_an_adapter_that_reads_types(monkeypatch):
    """BatchNormalization could read types but stays as it is; Squeeze's adapter reads none."""
    runs = []
    real = driver.infer_types

    def counted(*args, **kwargs):
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "infer_types", counted)
    monkeypatch.setattr(proto_path, "infer_types", counted)
    stats = [
        numpy_helper.from_array(np.full(3, v, np.float32), n)
        for n, v in (("s", 1.5), ("b", 0.1), ("mean", 0.2), ("var", 2.0))
    ]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["n"]),
        helper.make_node("Squeeze", ["n"], ["y"], axes=[0]),
    ]
    m = make_model(
        nodes, [tensor("x", TensorProto.FLOAT, [1, 3, 2])], [tensor("y", TensorProto.FLOAT, [3, 2])], 9, stats
    )
    up = converted_in_place(m, 21)
    assert [n.op_type for n in up.graph.node] == ["BatchNormalization", "Squeeze"]
    assert runs == []  # neither way: no adapter asked for a type
    runs.clear()
    clip = make_model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Clip", ["r"], ["y"], min=0.0, max=1.0)],
        [tensor("x", TensorProto.FLOAT, [3])],
        [tensor("y", TensorProto.FLOAT, [3])],
        9,
    )
    converted_in_place(clip, 21)  # Clip's bounds take the element type of r, which only inference knows
    assert len(runs) == 2  # once each way
    x = RNG.standard_normal((1, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(ort_outputs(up, {"x": x})[0], ort_outputs(m, {"x": x})[0], rtol=1e-6)


def test_subgraphs_and_refusals_go_the_whole_model_way():
    then = helper.make_graph(
        [helper.make_node("Squeeze", ["x"], ["t"], axes=[0])], "then", [], [tensor("t", TensorProto.FLOAT, [3])]
    )
    other = helper.make_graph(
        [helper.make_node("Squeeze", ["x"], ["e"], axes=[0])], "else", [], [tensor("e", TensorProto.FLOAT, [3])]
    )
    m = make_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [tensor("c", TensorProto.BOOL, []), tensor("x", TensorProto.FLOAT, [1, 3])],
        [tensor("y", TensorProto.FLOAT, [3])],
        11,
    )
    before = proto_path.FALLBACKS["subgraphs"]
    up = convert_proto(m, 13)
    assert proto_path.FALLBACKS["subgraphs"] == before + 1
    assert parts(up) == parts(whole_model_way(m, 13))

    refused = make_model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Reshape", ["x", "shape"], ["y"], name="dynamic_reshape"),
        ],
        [tensor("x", TensorProto.FLOAT, [2, 3])],
        [tensor("y", TensorProto.FLOAT, [2, 3])],
        13,
    )
    before = proto_path.FALLBACKS["refused"]
    with pytest.raises(opconv.ConversionError) as ours:
        convert_proto(refused, 4)
    assert proto_path.FALLBACKS["refused"] == before + 1
    with pytest.raises(opconv.ConversionError) as whole:
        whole_model_way(refused, 4)
    assert str(ours.value) == str(whole.value) and "dynamic_reshape" in str(ours.value)


def test_an_output_renamed_for_an_untouched_reader_goes_the_whole_model_way():
    """An adapter that lets another value take an output's place: the untouched reader must follow."""

    def identity_dropped(ctx, node):
        ctx.replace(node, [node.inputs[0]])

    m = make_model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Identity", ["r"], ["i"]),
            helper.make_node("Neg", ["i"], ["y"]),
        ],
        [tensor("x", TensorProto.FLOAT, [3])],
        [tensor("y", TensorProto.FLOAT, [3])],
        12,
    )
    caches = (driver._next_step, driver._upgrade_steps, driver.unchanged_form)
    upgrade("Identity", 13)(identity_dropped)
    try:
        for cache in caches:
            cache.cache_clear()
        before = proto_path.FALLBACKS["output renamed"]
        up = convert_proto(m, 13)
        assert proto_path.FALLBACKS["output renamed"] == before + 1
    finally:
        lowering.withdraw("onnx", "onnx:up", "Identity", 13)
        for cache in caches:
            cache.cache_clear()
    assert [(n.op_type, list(n.input)) for n in up.graph.node] == [("Relu", ["x"]), ("Neg", ["r"])]


def test_benchmark_model_computes_the_same_in_onnxruntime():
    """The benchmark's block (11 of 21 nodes rewritten) up to 21 and back to 13, run by onnxruntime."""
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "bench_version_converter.py")
    spec = importlib.util.spec_from_file_location("bench_version_converter", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    m = bench.build_model(3)
    up = converted_in_place(m, 21)
    down = converted_in_place(up, 13)
    x = RNG.standard_normal((1, bench.C, bench.H, bench.H)).astype(np.float32)
    expected = ort_outputs(m, {"x": x})[0]
    for converted in (up, down):
        np.testing.assert_allclose(ort_outputs(converted, {"x": x})[0], expected, rtol=1e-5, atol=1e-6)


# -- the memo: repeated node forms converted once, then written from a template ------------------


def attrs_of(n: onnx.NodeProto) -> tuple:
    return node_fields(n)[5]


def canonical(m: onnx.ModelProto, source: onnx.ModelProto) -> tuple:
    """The graph with every name the conversion made replaced by what makes it (an initializer's
    content, or a node's op, attributes, inputs and output index): equal for two conversions that
    differ only in the names they gave new values and nodes."""
    sg = source.graph
    kept = {v.name for v in (*sg.input, *sg.output, *sg.initializer)} | {o for n in sg.node for o in n.output}
    node_names = {n.name for n in sg.node}
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    producers = {o: (n, k) for n in g.node for k, o in enumerate(n.output) if o}
    seen: dict[str, object] = {}

    def canon(name):
        if not name or name in kept:
            return name
        if name not in seen:
            if name in inits:
                t = inits[name]
                seen[name] = ("initializer", t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes())
            else:
                n, k = producers[name]
                seen[name] = ("made", n.op_type, n.domain, attrs_of(n), tuple(map(canon, n.input)), k)
        return seen[name]

    nodes = sorted(
        repr(
            (
                n.op_type,
                n.domain,
                attrs_of(n),
                tuple(map(canon, n.input)),
                tuple(map(canon, n.output)),
                n.name if n.name in node_names else "made",
            )
        )
        for n in g.node
    )
    initializers = sorted(repr(canon(t.name)) for t in g.initializer)
    return (
        nodes,
        initializers,
        [v.name for v in g.input],
        [v.name for v in g.output],
        sorted((o.domain, o.version) for o in m.opset_import),
    )


def memo_converted(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """The protobuf path's result, which must reuse templates and equal the whole-model way's up to new names."""
    before = proto_path.MEMO.copy()
    result = proto_path.convert(model, opset)
    assert result is not None, proto_path.FALLBACKS
    memo_converted.counts = proto_path.MEMO - before
    assert memo_converted.counts["reused"] > 0  # the memo was used
    onnx.checker.check_model(result, full_check=True)
    assert canonical(result, model) == canonical(whole_model_way(model, opset), model)
    g = result.graph
    defined = [o for n in g.node for o in n.output if o] + [t.name for t in g.initializer] + [v.name for v in g.input]
    initialized = {t.name for t in g.initializer}
    assert len(set(defined)) == len(defined) - sum(v.name in initialized for v in g.input)  # new names are unique
    assert proto_path.convert(model, opset).SerializeToString() == result.SerializeToString()  # and deterministic
    return result


def chain(blocks, inputs, outputs, opset, initializers=(), value_info=()):
    m = make_model(blocks, inputs, outputs, opset, initializers)
    m.graph.value_info.extend(value_info)
    return m


def test_memo_clip_bounds_take_each_nodes_inferred_element_type():
    """Clip-11's bounds have the input's element type, which only shape inference knows here:
    float and double branches share a key but not the facts, so each gets its own template."""
    nodes = []
    for branch, x in (("f", "xf"), ("d", "xd")):
        for k in range(4):
            nodes += [
                helper.make_node("Abs", [x], [f"{branch}r{k}"]),
                helper.make_node(
                    "Clip",
                    [f"{branch}r{k}"],
                    [f"{branch}c{k}"],
                    name=f"{branch}clip{k}",
                    min=-0.5,
                    max=0.25 if k % 2 else 0.75,
                ),
            ]
            x = f"{branch}c{k}"
    m = chain(
        nodes,
        [tensor("xf", TensorProto.FLOAT, [2, 3]), tensor("xd", TensorProto.DOUBLE, [2, 3])],
        [tensor("fc3", TensorProto.FLOAT, [2, 3]), tensor("dc3", TensorProto.DOUBLE, [2, 3])],
        9,
    )
    up = memo_converted(m, 21)
    # two attribute sets x two element types, and each branch's last Clip (a graph output)
    assert memo_converted.counts == {"converted": 6, "reused": 2}
    bounds = {t.name: t.data_type for t in up.graph.initializer}
    for n in up.graph.node:
        if n.op_type == "Clip":
            assert {bounds[b] for b in n.input[1:]} == {TensorProto.FLOAT if n.name[0] == "f" else TensorProto.DOUBLE}
    feeds = {"xf": RNG.standard_normal((2, 3)).astype(np.float32), "xd": RNG.standard_normal((2, 3))}
    expected = []
    for x in feeds.values():  # onnxruntime has no double Clip-6 to run the source with
        for k in range(4):
            x = np.clip(np.abs(x), x.dtype.type(-0.5), x.dtype.type(0.25 if k % 2 else 0.75))
        expected.append(x)
    for e, a in zip(expected, ort_outputs(up, feeds)):
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(a, e)


def test_memo_softmax_decomposes_by_each_nodes_rank():
    """Softmax-13 on the last axis keeps one node; on another axis it becomes Flatten, Softmax,
    Shape, Reshape.  Ranks come from inference (unnamed nodes) and from value_info (declared)."""
    nodes, outputs = [], []
    for shape_name, x in (("two", "x2"), ("four", "x4")):
        for k in range(3):
            r, s = f"{shape_name}_r{k}", f"{shape_name}_s{k}"
            nodes += [helper.make_node("Relu", [x], [r]), helper.make_node("Softmax", [r], [s], axis=1)]
            x = s
        outputs.append(tensor(x, TensorProto.FLOAT, ["d0", "d1"] if shape_name == "two" else ["d0", "d1", "d2", "d3"]))
    declared = [tensor("four_r1", TensorProto.FLOAT, [2, 3, 4, 5]), tensor("two_r2", TensorProto.FLOAT, [3, 4])]
    m = chain(
        nodes,
        [tensor("x2", TensorProto.FLOAT, [3, 4]), tensor("x4", TensorProto.FLOAT, [2, 3, 4, 5])],
        outputs,
        11,
        value_info=declared,
    )
    up = memo_converted(m, 13)
    ops = [n.op_type for n in up.graph.node]
    assert ops.count("Flatten") == 3 and ops.count("Softmax") == 6
    feeds = {
        "x2": RNG.standard_normal((3, 4)).astype(np.float32),
        "x4": RNG.standard_normal((2, 3, 4, 5)).astype(np.float32),
    }
    for e, a in zip(ort_outputs(m, feeds), ort_outputs(up, feeds)):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def test_memo_dropout_mask_follows_each_nodes_readers():
    """Downgraded below 12, Dropout's mask goes when nothing reads it and stays when a node or
    the graph's outputs do; ratio constants of equal content share a template, others do not."""
    ratios = [
        numpy_helper.from_array(np.array(v, np.float32), name)
        for name, v in (("ratio_a", 0.1), ("ratio_b", 0.1), ("ratio_c", 0.3))
    ]
    nodes, outputs, x = [], [], "x"
    for k in range(6):
        ratio = ("ratio_a", "ratio_b", "ratio_c")[k % 3]
        nodes.append(helper.make_node("Dropout", [x, ratio], [f"y{k}", f"mask{k}"], name=f"drop{k}"))
        if k % 3 == 1:
            nodes.append(helper.make_node("Not", [f"mask{k}"], [f"not{k}"]))
            outputs.append(tensor(f"not{k}", TensorProto.BOOL, [2, 3]))
        elif k % 3 == 2:
            outputs.append(tensor(f"mask{k}", TensorProto.BOOL, [2, 3]))
        x = f"y{k}"
    m = chain(
        nodes, [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor(x, TensorProto.FLOAT, [2, 3]), *outputs], 13, ratios
    )
    down = memo_converted(m, 11)
    kept = {n.name: len(n.output) for n in down.graph.node if n.op_type == "Dropout"}
    assert kept == {f"drop{k}": 1 if k % 3 == 0 else 2 for k in range(6)}
    ratio_of = {
        n.name: next(a.f for a in n.attribute if a.name == "ratio") for n in down.graph.node if n.op_type == "Dropout"
    }
    assert ratio_of == {f"drop{k}": pytest.approx(0.3 if k % 3 == 2 else 0.1) for k in range(6)}
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(ort_outputs(down, {"x": x})[0], ort_outputs(m, {"x": x})[0])
    # onnxruntime's Dropout-10 writes an all-false mask; the specification's inference mode keeps
    # every element (mask all true), which is what opconv's executor must compute on the result
    masks = opconv.run(down, {"x": x})
    for name in ("not1", "not4"):
        np.testing.assert_array_equal(masks[name], np.zeros((2, 3), bool))
    for name in ("mask2", "mask5"):
        np.testing.assert_array_equal(masks[name], np.ones((2, 3), bool))


def test_memo_constant_inputs_become_each_nodes_attributes():
    """Slice-13 and Unsqueeze-13 down to 9: each node's constants (initializers or Constant nodes,
    shared or of equal content under another name) become its own attributes."""

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    consts = [
        ints("s0", [0]),
        ints("e0", [2]),
        ints("s1", [1]),
        ints("e1", [3]),
        ints("s0_again", [0]),
        ints("ax0", [0]),
        ints("ax1", [1]),
    ]
    nodes = [helper.make_node("Constant", [], ["ax_node"], value=numpy_helper.from_array(np.array([0], np.int64)))]
    x = "x"
    for k, (start, end, axes) in enumerate(
        (
            ("s0", "e0", "ax0"),
            ("s1", "e1", "ax1"),
            ("s0_again", "e0", "ax0"),
            ("s0", "e0", "ax_node"),
            ("s1", "e1", "ax1"),
        )
    ):
        nodes += [
            helper.make_node("Unsqueeze", [x, "ax0"], [f"u{k}"], name=f"unsqueeze{k}"),
            helper.make_node("Squeeze", [f"u{k}", "ax0"], [f"q{k}"], name=f"squeeze{k}"),
            helper.make_node("Slice", [f"q{k}", start, end, axes], [f"sl{k}"], name=f"slice{k}"),
            helper.make_node("Pad", [f"sl{k}", "pads"], [f"p{k}"], name=f"pad{k}"),
        ]
        x = f"p{k}"
    pads = numpy_helper.from_array(np.array([1, 1, 0, 0], np.int64), "pads")
    m = chain(
        nodes,
        [tensor("x", TensorProto.FLOAT, [4, 4])],
        [tensor(x, TensorProto.FLOAT, ["rows", "columns"])],
        13,
        consts + [pads],
    )
    down = memo_converted(m, 9)
    starts = {
        n.name: list(next(a.ints for a in n.attribute if a.name == "starts"))
        for n in down.graph.node
        if n.op_type == "Slice"
    }
    assert starts == {"slice0": [0], "slice1": [1], "slice2": [0], "slice3": [0], "slice4": [1]}
    feeds = {"x": RNG.standard_normal((4, 4)).astype(np.float32)}
    np.testing.assert_array_equal(ort_outputs(down, feeds)[0], ort_outputs(m, feeds)[0])


def test_memo_int8_add_casts_follow_each_nodes_operands():
    """Add-14 on int8 goes to 13 through int32 Casts (new names made from the node's and its output's
    names); Add(a, a) and Add(a, b) differ in which input repeats.  Checked against numpy's int8
    arithmetic, which wraps around like ONNX's."""
    nodes = []
    x = "a"
    for k in range(8):
        other = x if k % 2 else "b"
        nodes.append(helper.make_node("Add", [x, other], [f"s{k}"], name=f"add{k}" if k < 6 else ""))
        x = f"s{k}"
    m = chain(
        nodes,
        [tensor("a", TensorProto.INT8, [5]), tensor("b", TensorProto.INT8, [5])],
        [tensor(x, TensorProto.INT8, [5])],
        14,
    )
    down = memo_converted(m, 13)
    assert [n.op_type for n in down.graph.node].count("Cast") == 24
    assert memo_converted.counts == {"converted": 5, "reused": 3}
    a = RNG.integers(-128, 128, 5).astype(np.int8)
    b = RNG.integers(-128, 128, 5).astype(np.int8)
    with np.errstate(over="ignore"):
        expected = a
        for k in range(8):
            expected = (expected + (expected if k % 2 else b)).astype(np.int8)
    np.testing.assert_array_equal(ort_outputs(down, {"a": a, "b": b})[0], expected)


def test_memo_keeps_a_few_templates_per_key_and_converts_the_rest_one_by_one():
    """Softmax(axis=1) on ten ranks, twice each: one key, ten sets of facts.  The first eight ranks
    are kept as templates and reused; ranks 10 and 11 convert every time."""
    nodes, inputs, outputs = [], [], []
    for copy in range(2):
        for rank in range(2, 12):
            x, r, s, y = f"x{rank}", f"r{rank}_{copy}", f"s{rank}_{copy}", f"y{rank}_{copy}"
            nodes += [
                helper.make_node("Relu", [x], [r]),
                helper.make_node("Softmax", [r], [s], axis=1),
                helper.make_node("Relu", [s], [y]),
            ]
            if copy == 0:
                inputs.append(tensor(x, TensorProto.FLOAT, [2] * rank))
            outputs.append(tensor(y, TensorProto.FLOAT, [2] * rank))
    m = chain(nodes, inputs, outputs, 11)
    up = memo_converted(m, 13)
    assert memo_converted.counts == {"converted": 12, "reused": 8}
    feeds = {f"x{rank}": RNG.standard_normal([2] * rank).astype(np.float32) for rank in range(2, 12)}
    for e, a in zip(ort_outputs(m, feeds), ort_outputs(up, feeds)):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def test_memo_clip_bounds_read_only_the_element_type():
    """Clip's adapter reads only its input's element type: Clips on tensors of four shapes share one
    template (as ReLU6 layers of a CNN do), and each still computes its own clip."""
    shapes = ([2, 3], [4], [1, 2, 3], [5, 1])
    nodes, inputs, outputs = [], [], []
    for k, shape in enumerate(shapes):
        nodes += [
            helper.make_node("Abs", [f"x{k}"], [f"a{k}"]),
            helper.make_node("Clip", [f"a{k}"], [f"c{k}"], name=f"relu6_{k}", min=0.0, max=6.0),
            helper.make_node("Neg", [f"c{k}"], [f"y{k}"]),
        ]
        inputs.append(tensor(f"x{k}", TensorProto.FLOAT, shape))
        outputs.append(tensor(f"y{k}", TensorProto.FLOAT, shape))
    m = chain(nodes, inputs, outputs, 9)
    up = memo_converted(m, 21)
    assert memo_converted.counts == {"converted": 1, "reused": 3}
    feeds = {f"x{k}": (RNG.standard_normal(shape) * 8).astype(np.float32) for k, shape in enumerate(shapes)}
    for x, y in zip(feeds.values(), ort_outputs(up, feeds)):
        np.testing.assert_array_equal(y, -np.clip(np.abs(x), np.float32(0), np.float32(6)))


def twice(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph twice over the same inputs and initializers (the copy's other names get a suffix),
    both copies' outputs graph outputs: the copy's nodes have the memo keys of the originals."""
    g = model.graph
    shared = {v.name for v in g.input} | {t.name for t in g.initializer} | {""}

    def renamed(name):
        return name if name in shared else name + "__copy"

    doubled = onnx.ModelProto()
    doubled.CopyFrom(model)
    dg = doubled.graph
    for n in g.node:
        c = dg.node.add()
        c.CopyFrom(n)
        c.name = n.name + "__copy" if n.name else ""
        c.input[:] = [renamed(x) for x in n.input]
        c.output[:] = [renamed(x) for x in n.output]
    for infos, into in ((g.value_info, dg.value_info), (g.output, dg.output)):
        for vi in list(infos):
            if vi.name not in shared:
                c = into.add()
                c.CopyFrom(vi)
                c.name = renamed(vi.name)
    return doubled


def test_node_cases_twice_reuse_templates_like_the_whole_model():
    """Every node case with its graph doubled, one opset down and to 21: where the copy is written from
    the original's templates, the result equals the whole-model way's up to made names.  This runs
    every adapter through the memo."""
    reused = differ = 0
    for name, model, targets in node_case_targets():
        doubled = twice(model)
        for target in targets:
            before = proto_path.MEMO["reused"]
            result = proto_path.convert(doubled, target)
            if result is None or proto_path.MEMO["reused"] == before:
                continue
            reused += 1
            try:
                expected = canonical(whole_model_way(doubled, target), doubled)
            except opconv.OpconvError:
                expected = None
            if canonical(result, doubled) != expected:
                differ += 1
                assert differ < 5, f"{name} -> {target}"
    assert differ == 0
    assert reused > 400  # measured 524

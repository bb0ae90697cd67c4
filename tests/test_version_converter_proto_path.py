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
from opconv.converters.onnx_versions import convert_proto, driver, proto_path
from opconv.converters.onnx_versions.registry import UPGRADES
from opconv.dialects.onnx.io import to_proto

from .test_version_converter import make_model, tensor

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
    return (sorted(map(node_fields, g.node)),
            sorted((t.name, t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes()) for t in g.initializer),
            [v.name for v in g.input], [v.name for v in g.output],
            sorted((o.domain, o.version) for o in m.opset_import), m.ir_version)


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


def test_node_cases_convert_to_the_same_nodes_both_ways():
    """Every node case one opset down and to 21: the same nodes as the whole-model way, or both refuse."""
    from opconv.testdata import node_cases

    taken = differ = 0
    for case in node_cases():
        model = case.load_model()
        source = next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), None)
        if source is None:
            continue
        for target in {max(source - 1, 1), 21} - {source}:
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
                assert differ < 5, f"{case.name} -> {target}"
    assert differ == 0
    assert taken > 2000  # measured 3,0xx: most cases take this path


def test_untouched_and_worked_nodes_read_each_other():
    """Relu/Add/Mul stay, Clip/Unsqueeze/Upsample/Dropout change; graph outputs come from both kinds."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),                                      # untouched
        helper.make_node("Clip", ["r"], ["c"], min=-0.5, max=0.5),                    # worked, reads untouched
        helper.make_node("Add", ["c", "r"], ["a"]),                                   # untouched, reads worked
        helper.make_node("Unsqueeze", ["a"], ["u"], axes=[0]),                        # worked
        helper.make_node("Squeeze", ["u"], ["s"], axes=[0]),                          # worked, reads worked
        helper.make_node("Upsample", ["s", "scales"], ["up"], mode="nearest"),        # replaced by Resize
        helper.make_node("Dropout", ["up"], ["d"], ratio=0.3),                        # worked
        helper.make_node("Mul", ["d", "up"], ["y"]),                                  # untouched, graph output
    ]
    m = make_model(nodes, [tensor("x", TensorProto.FLOAT, [1, 2, 3, 4])],
                   [tensor("y", TensorProto.FLOAT, [1, 2, 6, 8]), tensor("c", TensorProto.FLOAT, [1, 2, 3, 4])],
                   9, [scales])
    up = converted_in_place(m, 21)
    assert [n.op_type for n in up.graph.node] == ["Relu", "Clip", "Add", "Unsqueeze", "Squeeze", "Resize",
                                                    "Dropout", "Mul"]
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
    nodes = [helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Gelu", ["n"], ["g"]),
             helper.make_node("Abs", ["g"], ["a"]),
             helper.make_node("LayerNormalization", ["a", "scale", "bias"], ["l"], axis=-1, epsilon=1e-5),
             helper.make_node("Sigmoid", ["l"], ["y"])]
    m = make_model(nodes, [tensor("x", TensorProto.FLOAT, [2, 6])], [tensor("y", TensorProto.FLOAT, [2, 6])],
                   20, [scale, bias])
    down = converted_in_place(m, 16)
    ops = [n.op_type for n in down.graph.node]
    assert ops[0] == "Neg" and ops[-1] == "Sigmoid" and "Gelu" not in ops and "LayerNormalization" not in ops
    assert ops.index("Abs") > ops.index("Erf")  # Gelu's decomposition in its place, before its reader
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(ort_outputs(down, {"x": x})[0], ort_outputs(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_negative_axes_are_counted_from_the_rank_below_opset_11():
    nodes = [helper.make_node("Concat", ["x", "x"], ["c"], axis=-1),
             helper.make_node("Flatten", ["c"], ["f"], axis=-1),
             helper.make_node("ArgMax", ["f"], ["y"], axis=-1, keepdims=0)]
    m = make_model(nodes, [tensor("x", TensorProto.FLOAT, [2, 3, 4])], [tensor("y", TensorProto.INT64, [6])], 13)
    down = converted_in_place(m, 10)
    assert [a.i for n in down.graph.node for a in n.attribute if a.name == "axis"] == [2, 2, 1]
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_outputs(down, {"x": x})[0], ort_outputs(m, {"x": x})[0])


def test_defaults_that_changed_are_written_out():
    """Selu-6's alpha/gamma defaults differ from Selu-1's (the spec's 1.6732632..., 1.0507009...)."""
    m = make_model([helper.make_node("Selu", ["x"], ["y"])], [tensor("x", TensorProto.FLOAT, [3])],
                   [tensor("y", TensorProto.FLOAT, [3])], 6)
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
    stats = [numpy_helper.from_array(np.full(3, v, np.float32), n) for n, v in
             (("s", 1.5), ("b", 0.1), ("mean", 0.2), ("var", 2.0))]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["n"]),
             helper.make_node("Squeeze", ["n"], ["y"], axes=[0])]
    m = make_model(nodes, [tensor("x", TensorProto.FLOAT, [1, 3, 2])], [tensor("y", TensorProto.FLOAT, [3, 2])],
                   9, stats)
    up = converted_in_place(m, 21)
    assert [n.op_type for n in up.graph.node] == ["BatchNormalization", "Squeeze"]
    assert runs == []  # neither way: no adapter asked for a type
    runs.clear()
    clip = make_model([helper.make_node("Relu", ["x"], ["r"]),
                       helper.make_node("Clip", ["r"], ["y"], min=0.0, max=1.0)],
                      [tensor("x", TensorProto.FLOAT, [3])], [tensor("y", TensorProto.FLOAT, [3])], 9)
    converted_in_place(clip, 21)  # Clip's bounds take the element type of r, which only inference knows
    assert len(runs) == 2  # once each way
    x = RNG.standard_normal((1, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(ort_outputs(up, {"x": x})[0], ort_outputs(m, {"x": x})[0], rtol=1e-6)


def test_subgraphs_and_refusals_go_the_whole_model_way():
    then = helper.make_graph([helper.make_node("Squeeze", ["x"], ["t"], axes=[0])], "then", [],
                             [tensor("t", TensorProto.FLOAT, [3])])
    other = helper.make_graph([helper.make_node("Squeeze", ["x"], ["e"], axes=[0])], "else", [],
                              [tensor("e", TensorProto.FLOAT, [3])])
    m = make_model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [tensor("c", TensorProto.BOOL, []), tensor("x", TensorProto.FLOAT, [1, 3])],
                   [tensor("y", TensorProto.FLOAT, [3])], 11)
    before = proto_path.FALLBACKS["subgraphs"]
    up = convert_proto(m, 13)
    assert proto_path.FALLBACKS["subgraphs"] == before + 1
    assert parts(up) == parts(whole_model_way(m, 13))

    refused = make_model([helper.make_node("Shape", ["x"], ["shape"]),
                          helper.make_node("Reshape", ["x", "shape"], ["y"], name="dynamic_reshape")],
                         [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, [2, 3])], 13)
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

    m = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["i"]),
                    helper.make_node("Neg", ["i"], ["y"])],
                   [tensor("x", TensorProto.FLOAT, [3])], [tensor("y", TensorProto.FLOAT, [3])], 12)
    caches = (driver._next_step, driver._upgrade_steps, driver.unchanged_form)
    UPGRADES[("Identity", 13)] = identity_dropped
    try:
        for cache in caches:
            cache.cache_clear()
        before = proto_path.FALLBACKS["output renamed"]
        up = convert_proto(m, 13)
        assert proto_path.FALLBACKS["output renamed"] == before + 1
    finally:
        del UPGRADES[("Identity", 13)]
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

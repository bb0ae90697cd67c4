"""ONNX Runtime's blocked NCHWc operators (com.microsoft.nchwc) against onnxruntime.

Small CNNs are optimized by onnxruntime itself at level 3 (``ORT_ENABLE_ALL``), which rewrites them into
ReorderInput / Conv / pools / Upsample / ReorderOutput in the block size its MLAS picks for this CPU; the saved
model must contain the expected nchwc operators, and opconv's run of it must match onnxruntime's (which runs the
saved model as it is, optimizations off).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import opconv
from opconv.compare import compare_arrays

ort = pytest.importorskip("onnxruntime")

NCHWC = "com.microsoft.nchwc"


class Net:
    """A graph built node by node, with random weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def weight(self, *shape):
        name = f"w{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(self.rng.uniform(-0.5, 0.5, shape).astype(np.float32), name))
        return name

    def add(self, op, inputs, **attrs):
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def conv(self, x, cin, cout, k=3, group=1, bias=True, **attrs):
        inputs = [x, self.weight(cout, cin // group, k, k)] + ([self.weight(cout)] if bias else [])
        pads = None if "auto_pad" in attrs else [k // 2] * 4
        return self.add("Conv", inputs, pads=pads, group=group, **attrs)

    def model(self, x_shape, outputs):
        graph = helper.make_graph(
            self.nodes,
            "cnn",
            [helper.make_tensor_value_info("x", 1, x_shape)],
            [helper.make_tensor_value_info(o, 1, None) for o in outputs],
            self.inits,
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def cnn(c0, c1, c2, activation, upsample, nhwc):
    """conv(+activation) -> MaxPool -> conv + 1x1 conv (Sum) -> depthwise conv -> AveragePool -> upsample, and
    both global pools of the last blocked value."""
    net = Net(c0 * 100 + c1 + c2)
    x = net.add("Transpose", ["x"], perm=[0, 3, 1, 2]) if nhwc else "x"
    y = net.conv(x, c0, c1)
    if activation:
        y = net.add(activation, [y], **({"alpha": 0.2} if activation == "LeakyRelu" else {}))
    y = net.add("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = net.add("Relu", [net.add("Add", [net.conv(y, c1, c2), net.conv(y, c1, c2, k=1, bias=False)])])
    y = net.conv(y, c2, c2, group=c2)
    y = net.add("AveragePool", [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0)
    if upsample:
        mode, transform = upsample
        net.inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
        y = net.add(
            "Resize", [y, "", "scales"], mode=mode, coordinate_transformation_mode=transform, nearest_mode="floor"
        )
    g = net.add("GlobalAveragePool", [net.conv(y, c2, c2)])
    m = net.add("GlobalMaxPool", [net.conv(y, c2, c2, k=1)])
    out = net.add("Transpose", [y], perm=[0, 2, 3, 1]) if nhwc else y
    shape = [1, 12, 12, c0] if nhwc else [1, c0, 12, 12]
    return net.model(shape, [out, g, m]), shape


def cnn_attributes():
    """Strides, dilations, ceil_mode, count_include_pad, auto_pad, Clip and HardSigmoid fused with parameters,
    a batch of 2, and pools that read a blocked value twice."""
    net = Net(5)
    net.inits += [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(0.6), "hi")]
    y = net.add("Clip", [net.conv("x", 16, 32, strides=[2, 2]), "lo", "hi"])
    y = net.add("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    y = net.add("HardSigmoid", [net.conv(y, 32, 32, dilations=[2, 2])], alpha=0.3, beta=0.4)
    y = net.add("AveragePool", [y], kernel_shape=[2, 2], pads=[0, 0, 1, 1], count_include_pad=1)
    y = net.conv(y, 32, 48, k=1, auto_pad="SAME_UPPER")
    a = net.add("AveragePool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    m = net.add("MaxPool", [y], kernel_shape=[2, 2], dilations=[2, 2])
    shape = [2, 16, 23, 23]
    return net.model(shape, [a, m]), shape


def build(case):
    return cnn_attributes() if case == "attributes" else cnn(*case)


def optimized(model, tmp_path):
    source, target = tmp_path / "m.onnx", tmp_path / "m_opt.onnx"
    onnx.save(model, source)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    return onnx.load(target)


CASES = [  # (c0, c1, c2, activation, upsample, nhwc)
    (3, 16, 32, "Relu", ("nearest", "asymmetric"), False),
    (3, 24, 40, "Sigmoid", ("linear", "half_pixel"), False),  # channels padded past a block
    (8, 32, 48, "LeakyRelu", ("linear", "align_corners"), False),
    (16, 32, 16, "Tanh", None, True),  # NHWC in and out: channels_last reorders
    (4, 20, 8, None, ("nearest", "asymmetric"), False),
]


def _expected_and_feeds(case, tmp_path):
    """The level-3 model of ``case``, an input, and onnxruntime's outputs for it (run as saved)."""
    model, shape = build(case)
    opt = optimized(model, tmp_path)
    feeds = {"x": np.random.default_rng(shape[1]).uniform(-1, 1, shape).astype(np.float32)}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(opt.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return opt, feeds, dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _assert_all_match(expected, got, where):
    reports = [compare_arrays(name, want, got[name]) for name, want in expected.items()]
    problems = [report.message for report in reports if not report.ok]
    assert not problems, f"{where}: {problems}"


@pytest.mark.parametrize("case", CASES + ["attributes"], ids=str)
def test_level3_nchwc_model_matches_onnxruntime(tmp_path, case):
    opt, feeds, expected = _expected_and_feeds(case, tmp_path)
    assert {"Conv", "ReorderOutput"} <= {n.op_type for n in opt.graph.node if n.domain == NCHWC}
    _assert_all_match(expected, opconv.run(opconv.load(opt), feeds), "opconv")


def test_every_nchwc_operator_is_exercised(tmp_path):
    """The cases above, taken together, make onnxruntime write all 8 nchwc operators."""
    seen = set()
    for case in CASES:
        model, _ = cnn(*case)
        seen |= {n.op_type for n in optimized(model, tmp_path).graph.node if n.domain == NCHWC}
    assert seen == {
        "Conv",
        "MaxPool",
        "AveragePool",
        "GlobalMaxPool",
        "GlobalAveragePool",
        "ReorderInput",
        "ReorderOutput",
        "Upsample",
    }, seen


@pytest.mark.parametrize("case", CASES + ["attributes"], ids=str)
def test_decomposed_level3_model_matches_onnxruntime(tmp_path, case):
    """``opconv decompose`` turns every nchwc node into standard operators that onnxruntime (and opconv) run
    to onnxruntime's results for the blocked model."""
    from opconv.converters.decompose import decompose
    from opconv.dialects.onnx import io as onnx_io
    from tests.runtimes import run_ort

    opt, feeds, expected = _expected_and_feeds(case, tmp_path)
    decomposed = onnx_io.to_proto(decompose(opt))
    assert all(n.domain in ("", "ai.onnx") for n in decomposed.graph.node)
    # between nchwc nodes the reorders cancel: the only Transposes left are the channels_last reorders'
    nhwc = sum(1 for n in opt.graph.node for a in n.attribute if a.name == "channels_last" and a.i)
    assert sum(1 for n in decomposed.graph.node if n.op_type == "Transpose") == nhwc
    onnx.checker.check_model(decomposed)
    _assert_all_match(expected, dict(zip(expected, run_ort(decomposed, feeds))), "onnxruntime")
    _assert_all_match(expected, opconv.run(opconv.load(decomposed), feeds), "opconv")


@pytest.mark.parametrize("case", CASES[1:3], ids=str)
def test_level3_model_converts_to_ir_and_hlo(tmp_path, case):
    """onnx-to-ir (run in OpenVINO at f32 and in opconv) and onnx-to-hlo (opconv's HLO executor) of the blocked
    model, through the decomposition."""
    pytest.importorskip("openvino")
    from tests.runtimes import convert_and_run_ir

    opt, feeds, expected = _expected_and_feeds(case, tmp_path)
    _, runs = convert_and_run_ir(tmp_path, opt, feeds)
    for runtime, got in runs.items():
        _assert_all_match(expected, got, runtime)
    hlo = opconv.convert(opconv.load(opt), to="hlo")
    _assert_all_match(expected, dict(zip(expected, opconv.run(hlo, feeds).values())), "HLO executor")


def test_cli_decomposes_by_default_and_the_hlo_runs_in_iree(tmp_path):
    """``opconv decompose`` takes the nchwc domain by default; the HLO of the blocked model, verified by IREE
    against onnxruntime."""
    pytest.importorskip("iree.runtime")
    from click.testing import CliRunner

    from opconv.cli import cli

    opt, _, _ = _expected_and_feeds(CASES[0], tmp_path)
    path = tmp_path / "opt.onnx"
    onnx.save(opt, path)
    runner = CliRunner()
    result = runner.invoke(cli, ["decompose", str(path), "-o", str(tmp_path / "std.onnx")])
    assert result.exit_code == 0, result.output
    assert not [n for n in onnx.load(tmp_path / "std.onnx").graph.node if n.domain == NCHWC]
    result = runner.invoke(cli, ["onnx-to-hlo", str(path), "-o", str(tmp_path / "m.hlo")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        cli, ["verify", str(path), str(tmp_path / "m.hlo"), "--backend", "A:onnxruntime", "--backend", "B:iree"]
    )
    assert result.exit_code == 0 and "3 outputs equal" in result.output, result.output

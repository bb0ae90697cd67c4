"""The OpenVINO opset1 reference executor against the OpenVINO runtime.

Each case builds one single-op model twice: with OpenVINO's own opset1 Python
API (run by the CPU plugin in f32) and as an opconv graph-core model (run by
``opconv.dialects.openvino.executor``), feeds both the same seeded random
inputs and compares every output with the float32 tolerances of
``opconv.compare``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("CI", "true")  # `import openvino` otherwise waits on telemetry

import openvino as ov  # noqa: E402
from openvino import opset1 as ops  # noqa: E402

# Opset1 operations whose Python builders OpenVINO ships only in later opset modules (same operation version).
from openvino import opset2, opset3  # noqa: E402

from opconv.compare import compare_arrays  # noqa: E402
from opconv.dialects.openvino.executor import Session  # noqa: E402
from opconv.errors import ExecutionError  # noqa: E402
from opconv.ir import Attr, Graph, Model, Node, Tensor, Value  # noqa: E402
from opconv.schemas import dialect_schemas  # noqa: E402
from opconv.types import TensorType, from_numpy  # noqa: E402

CORE = ov.Core()
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


@dataclass
class P:
    """A graph input (Parameter) fed with ``data``."""

    data: np.ndarray


@dataclass
class C:
    """A constant input (Const / initializer)."""

    data: np.ndarray


@dataclass
class Case:
    id: str
    op: str
    inputs: list  # P / C per input port (None: an absent optional port)
    attrs: dict  # opconv attributes by IR name
    build: Callable[..., Any]  # OpenVINO node from the input nodes
    outputs: int = 1
    tol: dict = field(default_factory=dict)


def _r(*shape, seed=0, dtype=np.float32, low=None, high=None):
    rng = np.random.default_rng(hash(shape) % 1000 + seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0 if low is None else low, 10 if high is None else high, shape).astype(dtype)
    if low is not None:
        return rng.uniform(low, high, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _i(*values):
    return np.array(values, dtype=np.int64)


def _opconv_model(case: Case) -> Model:
    g = Graph("g")
    schema = dialect_schemas("openvino").find(case.op, 1, "opset1")
    values: list[Value | None] = []
    for k, item in enumerate(case.inputs):
        if item is None:
            values.append(None)
        elif isinstance(item, P):
            values.append(g.add_input(f"in{k}", TensorType(from_numpy(item.data.dtype).name, item.data.shape)))
        else:
            values.append(g.add_initializer(f"c{k}", Tensor.from_array(np.asarray(item.data))))
    attrs = [Attr(name, schema.attribute(name).type, value) for name, value in case.attrs.items()]
    outs = [Value(f"out{k}") for k in range(case.outputs)]
    g.add_node(Node(case.op, values, outs, domain="opset1", version=1, name="op", attrs=attrs))
    g.outputs.extend(outs)
    return Model(g, "openvino", {"opset1": 1})


def _openvino_outputs(case: Case, feeds: dict) -> list[np.ndarray]:
    params, nodes = [], []
    for k, item in enumerate(case.inputs):
        if item is None:
            continue
        if isinstance(item, P):
            params.append(ops.parameter(list(item.data.shape), item.data.dtype, name=f"in{k}"))
            nodes.append(params[-1])
        else:
            nodes.append(ops.constant(np.asarray(item.data)))
    node = case.build(*nodes)
    model = ov.Model([node.output(k) for k in range(case.outputs)], params, case.id)
    compiled = CORE.compile_model(model, "CPU", CONFIG)
    result = compiled({f"in{k}": v for k, v in feeds.items()})
    return [result[compiled.output(k)] for k in range(case.outputs)]


def _feeds(case: Case) -> dict:
    return {k: item.data for k, item in enumerate(case.inputs) if isinstance(item, P)}


def check(case: Case) -> None:
    feeds = _feeds(case)
    expected = _openvino_outputs(case, feeds)
    actual = Session(_opconv_model(case)).run({f"in{k}": v for k, v in feeds.items()})
    for k, e in enumerate(expected):
        a = actual[f"out{k}"]
        e = np.asarray(e).astype(a.dtype) if np.asarray(e).dtype != a.dtype and _same_kind(e, a) else e
        report = compare_arrays(f"{case.id}:{k}", e, a, **case.tol)
        assert report.ok, report.message


def _same_kind(e, a) -> bool:
    # OpenVINO's CPU plugin computes i64 as i32 and reports some outputs in a narrower integer type.
    return np.asarray(e).dtype.kind == np.asarray(a).dtype.kind


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------

X = _r(2, 3, 4, 5)
Y = _r(3, 1, 5, seed=1)
POS = _r(2, 3, 4, low=0.1, high=4.0)
INTS = _r(3, 4, dtype=np.int32, low=-9, high=9)
NZ_INTS = np.where(
    _r(3, 4, dtype=np.int32, low=-5, high=5, seed=2) == 0, 3, _r(3, 4, dtype=np.int32, low=-5, high=5, seed=2)
).astype(np.int32)
BOOLS = _r(3, 4, dtype=np.int32, low=0, high=2).astype(bool)
BOOLS2 = _r(3, 4, dtype=np.int32, low=0, high=2, seed=3).astype(bool)

BINARY = {
    "Add": ops.add,
    "Subtract": ops.subtract,
    "Multiply": ops.multiply,
    "Divide": ops.divide,
    "Maximum": ops.maximum,
    "Minimum": ops.minimum,
    "SquaredDifference": ops.squared_difference,
    "Equal": ops.equal,
    "NotEqual": ops.not_equal,
    "Less": ops.less,
    "LessEqual": ops.less_equal,
    "Greater": ops.greater,
    "GreaterEqual": ops.greater_equal,
}
LOGICAL = {"LogicalAnd": ops.logical_and, "LogicalOr": ops.logical_or, "LogicalXor": ops.logical_xor}
UNARY = {
    "Abs": ops.abs,
    "Negative": ops.negative,
    "Sign": ops.sign,
    "Ceiling": ops.ceiling,
    "Floor": ops.floor,
    "Exp": ops.exp,
    "Sin": ops.sin,
    "Cos": ops.cos,
    "Tan": ops.tan,
    "Atan": ops.atan,
    "Sinh": ops.sinh,
    "Cosh": ops.cosh,
    "Tanh": ops.tanh,
    "Erf": ops.erf,
    "Sigmoid": ops.sigmoid,
    "ReLU": ops.relu,
}
POSITIVE_UNARY = {"Sqrt": ops.sqrt, "Log": ops.log}
UNIT_UNARY = {"Asin": ops.asin, "Acos": ops.acos}


def _elementwise_cases():
    cases = []
    for name, fn in BINARY.items():
        cases.append(Case(f"{name}-numpy", name, [P(X), P(Y)], {}, lambda a, b, fn=fn: fn(a, b)))
        cases.append(
            Case(
                f"{name}-none",
                name,
                [P(X), P(X + 1)],
                {"auto_broadcast": "none"},
                lambda a, b, fn=fn: fn(a, b, auto_broadcast="none"),
            )
        )
    for name, fn in {"Add": ops.add, "Multiply": ops.multiply}.items():
        cases.append(Case(f"{name}-int", name, [P(INTS), P(NZ_INTS)], {}, lambda a, b, fn=fn: fn(a, b)))
    # Non-negative operands only: the CPU plugin truncates integer quotients even with m_pythondiv (the
    # specification, which opconv follows, floors them).
    cases.append(Case("Divide-int", "Divide", [P(np.abs(INTS)), P(np.abs(NZ_INTS))], {}, ops.divide))
    cases += [
        Case("Power", "Power", [P(POS), C(np.float32([0.5, 2.0, -1.0, 3.0]))], {}, lambda a, b: ops.power(a, b)),
        Case("FloorMod-int", "FloorMod", [P(INTS), P(NZ_INTS)], {}, lambda a, b: ops.floor_mod(a, b)),
        Case("FloorMod-float", "FloorMod", [P(X), C(np.float32(0.7))], {}, lambda a, b: ops.floor_mod(a, b)),
        Case("Mod-int", "Mod", [P(INTS), P(NZ_INTS)], {}, lambda a, b: ops.mod(a, b)),
        Case("Mod-float", "Mod", [P(X), C(np.float32(-0.7))], {}, lambda a, b: ops.mod(a, b)),
    ]
    for name, fn in LOGICAL.items():
        cases.append(Case(name, name, [P(BOOLS), P(BOOLS2)], {}, lambda a, b, fn=fn: fn(a, b)))
    cases.append(Case("LogicalNot", "LogicalNot", [P(BOOLS)], {}, ops.logical_not))
    for table, data in ((UNARY, X), (POSITIVE_UNARY, POS), (UNIT_UNARY, np.tanh(X))):
        for name, fn in table.items():
            cases.append(Case(name, name, [P(data)], {}, fn))
    cases += [
        Case("Elu", "Elu", [P(X)], {"alpha": 0.7}, lambda x: ops.elu(x, 0.7)),
        Case("Clamp", "Clamp", [P(X)], {"min": -0.5, "max": 0.8}, lambda x: ops.clamp(x, -0.5, 0.8)),
        Case("Clamp-int", "Clamp", [P(INTS)], {"min": -2.5, "max": 3.5}, lambda x: ops.clamp(x, -2.5, 3.5)),
        Case("PReLU-channel", "PReLU", [P(X), C(np.float32([0.1, 0.2, 0.3]))], {}, ops.prelu),
        Case("PReLU-scalar", "PReLU", [P(X), C(np.float32([0.25]))], {}, ops.prelu),
        Case("HardSigmoid", "HardSigmoid", [P(X), C(np.float32(0.3)), C(np.float32(0.4))], {}, ops.hard_sigmoid),
        Case("Selu", "Selu", [P(X), C(np.float32([1.6])), C(np.float32([1.05]))], {}, ops.selu),
        Case("Select", "Select", [P(BOOLS), P(_r(3, 4)), P(_r(1, 4, seed=5))], {}, ops.select),
        Case("Convert-i32", "Convert", [P(X * 3)], {"destination_type": "int32"}, lambda x: ops.convert(x, "i32")),
        Case("Convert-f32", "Convert", [P(INTS)], {"destination_type": "float32"}, lambda x: ops.convert(x, "f32")),
        Case("Convert-bool", "Convert", [P(INTS)], {"destination_type": "bool"}, lambda x: ops.convert(x, "boolean")),
        Case("ConvertLike", "ConvertLike", [P(INTS), C(np.float32([1]))], {}, ops.convert_like),
        Case(
            "FakeQuantize",
            "FakeQuantize",
            [P(X), C(np.float32(-1)), C(np.float32(1.2)), C(np.float32(-0.5)), C(np.float32(2.0))],
            {"levels": 7},
            lambda *a: ops.fake_quantize(*a, 7),
        ),
        Case(
            "FakeQuantize-channel",
            "FakeQuantize",
            [
                P(X),
                C(_r(1, 3, 1, 1, low=-2, high=-0.5)),
                C(_r(1, 3, 1, 1, low=0.5, high=2)),
                C(np.float32(0)),
                C(np.float32(255)),
            ],
            {"levels": 256},
            lambda *a: ops.fake_quantize(*a, 256),
            tol={"atol": 1e-3},
        ),
    ]
    return cases


IMG = _r(2, 4, 7, 6, seed=7)
W = _r(6, 4, 3, 3, seed=8)
GW = _r(2, 3, 2, 3, 3, seed=9)  # (G, O/G, C/G, K...)
BW = _r(4, 3, 3, 3, seed=10)  # (C_in, C_out, K...)
GBW = _r(2, 2, 3, 3, 3, seed=11)  # (G, C_in/G, C_out/G, K...)


def _conv_cases():
    cases = []
    for pad in ("explicit", "same_upper", "same_lower", "valid"):
        for strides, dil in (([1, 1], [1, 1]), ([2, 2], [1, 2])):
            kw = dict(strides=strides, pads_begin=[1, 0], pads_end=[0, 2], dilations=dil, auto_pad=pad)
            tag = f"{pad}-s{strides[0]}d{dil[1]}"
            cases.append(
                Case(
                    f"Convolution-{tag}",
                    "Convolution",
                    [P(IMG), C(W)],
                    kw,
                    lambda x, w, kw=kw: ops.convolution(x, w, **kw),
                )
            )
            cases.append(
                Case(
                    f"GroupConvolution-{tag}",
                    "GroupConvolution",
                    [P(IMG), C(GW)],
                    kw,
                    lambda x, w, kw=kw: ops.group_convolution(x, w, **kw),
                )
            )
    for pad in ("explicit", "same_upper", "same_lower", "valid"):
        kw = dict(strides=[2, 2], pads_begin=[1, 0], pads_end=[0, 1], dilations=[1, 1], auto_pad=pad)
        cases.append(
            Case(
                f"BackpropData-{pad}",
                "ConvolutionBackpropData",
                [P(IMG), C(BW)],
                kw,
                lambda x, w, kw=kw: ops.convolution_backprop_data(x, w, **kw),
            )
        )
        cases.append(
            Case(
                f"GroupBackpropData-{pad}",
                "GroupConvolutionBackpropData",
                [P(IMG), C(GBW)],
                kw,
                lambda x, w, kw=kw: ops.group_convolution_backprop_data(x, w, **kw),
            )
        )
    kw = dict(strides=[2, 3], pads_begin=[0, 1], pads_end=[1, 0], dilations=[2, 1], output_padding=[1, 2])
    cases.append(
        Case(
            "BackpropData-output_padding",
            "ConvolutionBackpropData",
            [P(IMG), C(BW)],
            kw,
            lambda x, w, kw=kw: ops.convolution_backprop_data(x, w, **kw),
        )
    )
    for pad in ("explicit", "same_upper", "same_lower"):
        kw = dict(strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], auto_pad=pad)
        cases.append(
            Case(
                f"BackpropData-output_shape-{pad}",
                "ConvolutionBackpropData",
                [P(IMG), C(BW), C(_i(16, 13))],
                kw,
                lambda x, w, s, kw=kw: ops.convolution_backprop_data(x, w, output_shape=s, **kw),
            )
        )
    return cases


def _ov_pool(kw: dict) -> dict:
    # OpenVINO's Python builders call the IR attribute ``kernel`` ``kernel_shape``.
    out = dict(kw)
    out["kernel_shape"] = out.pop("kernel")
    return out


def _pool_cases():
    cases = []
    for rounding in ("floor", "ceil"):
        # ceil + explicit: the last window along W starts in the end padding; the runtime keeps it.
        for pad in ("explicit", "same_upper", "same_lower", "valid"):
            kw = dict(
                strides=[2, 2], pads_begin=[1, 0], pads_end=[1, 1], kernel=[3, 2], rounding_type=rounding, auto_pad=pad
            )
            cases.append(
                Case(
                    f"MaxPool-{rounding}-{pad}",
                    "MaxPool",
                    [P(IMG)],
                    kw,
                    lambda x, kw=kw: ops.max_pool(x, **_ov_pool(kw)),
                )
            )
            for exclude in (True, False):
                akw = dict(kw, exclude_pad=exclude)
                cases.append(
                    Case(
                        f"AvgPool-{rounding}-{pad}-ex{int(exclude)}",
                        "AvgPool",
                        [P(IMG)],
                        {k if k != "exclude_pad" else "exclude-pad": v for k, v in akw.items()},
                        lambda x, akw=akw: ops.avg_pool(x, **_ov_pool(akw)),
                    )
                )
    return cases


def _matmul_cases():
    cases = []
    shapes = [
        ((3, 4), (4, 5), False, False),
        ((4, 5), (3, 4), True, True),
        ((2, 3, 4), (2, 5, 4), False, True),
        ((4,), (2, 4, 3), False, False),
        ((2, 4, 3), (4,), True, True),
        ((4,), (4,), False, False),
        ((1, 4, 3), (2, 4, 5), True, False),
    ]
    for k, (sa, sb, ta, tb) in enumerate(shapes):
        cases.append(
            Case(
                f"MatMul-{k}",
                "MatMul",
                [P(_r(*sa, seed=k)), P(_r(*sb, seed=k + 50))],
                {"transpose_a": ta, "transpose_b": tb},
                lambda a, b, ta=ta, tb=tb: ops.matmul(a, b, ta, tb),
            )
        )
    return cases


def _shape_cases():
    d = _r(2, 3, 4, 1)
    return [
        Case(
            "Reshape", "Reshape", [P(d), C(_i(4, -1))], {"special_zero": False}, lambda x, s: ops.reshape(x, s, False)
        ),
        Case(
            "Reshape-special_zero",
            "Reshape",
            [P(d), C(_i(0, 0, -1))],
            {"special_zero": True},
            lambda x, s: ops.reshape(x, s, True),
        ),
        Case("Transpose", "Transpose", [P(d), C(_i(2, 0, 3, 1))], {}, ops.transpose),
        Case("Concat", "Concat", [P(d), P(d + 1), C(d * 2)], {"axis": -3}, lambda *a: ops.concat(list(a), -3)),
        Case("Split", "Split", [P(d), C(np.int64(2))], {"num_splits": 2}, lambda x, a: ops.split(x, a, 2), outputs=2),
        Case(
            "VariadicSplit",
            "VariadicSplit",
            [P(d), C(np.int64(-2)), C(_i(1, -1, 2))],
            {},
            ops.variadic_split,
            outputs=3,
        ),
        Case("Squeeze", "Squeeze", [P(d), C(_i(-1))], {}, ops.squeeze),
        Case("Unsqueeze", "Unsqueeze", [P(d), C(_i(0, -1))], {}, ops.unsqueeze),
        Case(
            "StridedSlice",
            "StridedSlice",
            [P(d), C(_i(0, 1, -1)), C(_i(2, 3, 0)), C(_i(1, 1, -2))],
            {"begin_mask": [1, 0, 0], "end_mask": [0, 0, 1]},
            lambda x, b, e, s: ops.strided_slice(x, b, e, s, [1, 0, 0], [0, 0, 1]),
        ),
        Case(
            "StridedSlice-masks",
            "StridedSlice",
            [P(d), C(_i(1, 0, 0, 2)), C(_i(2, 0, 0, 4)), C(_i(1, 1, 1, 1))],
            {
                "begin_mask": [0, 0, 0, 0],
                "end_mask": [0, 0, 0, 0],
                "new_axis_mask": [0, 1, 0, 0],
                "shrink_axis_mask": [1, 0, 0, 0],
                "ellipsis_mask": [0, 0, 1, 0],
            },
            lambda x, b, e, s: ops.strided_slice(
                x, b, e, s, [0] * 4, [0] * 4, [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]
            ),
        ),
        Case("Gather", "Gather", [P(d), C(_i(2, 0, 2, 1)), C(np.int64(1))], {}, ops.gather),
        Case("Gather-2d", "Gather", [P(d), C(np.array([[3, 0], [1, 1]], np.int32)), C(np.int64(-2))], {}, ops.gather),
        Case("Tile", "Tile", [P(d), C(_i(2, 1, 3))], {}, ops.tile),
        Case("Broadcast-numpy", "Broadcast", [P(_r(3, 1)), C(_i(2, 3, 4))], {}, ops.broadcast),
        Case(
            "Broadcast-explicit",
            "Broadcast",
            [P(_r(3, 4)), C(_i(3, 2, 4)), C(_i(0, 2))],
            {"mode": "explicit"},
            lambda x, s, m: ops.broadcast(x, s, m, "explicit"),
        ),
        *[
            Case(
                f"Pad-{mode}",
                "Pad",
                [P(_r(3, 4)), C(_i(1, 2)), C(_i(2, 1)), C(np.float32(1.5))],
                {"pad_mode": mode},
                lambda x, b, e, v, mode=mode: ops.pad(x, b, e, mode, v),
            )
            for mode in ("constant", "edge", "reflect", "symmetric")
        ],
        Case("ShapeOf", "ShapeOf", [P(d)], {}, ops.shape_of),
        Case("Range", "Range", [C(np.float32(1.5)), C(np.float32(-3)), C(np.float32(-0.7))], {}, ops.range),
        Case("Range-int", "Range", [C(np.int32(2)), C(np.int32(11)), C(np.int32(3))], {}, ops.range),
        Case(
            "OneHot",
            "OneHot",
            [P(np.array([[0, 3], [2, 5]], np.int32)), C(np.int64(4)), C(np.float32(2)), C(np.float32(-1))],
            {"axis": 1},
            lambda *a: ops.one_hot(*a, 1),
        ),
        *[
            Case(
                f"DepthToSpace-{m}",
                "DepthToSpace",
                [P(_r(1, 8, 2, 3))],
                {"mode": m, "block_size": 2},
                lambda x, m=m: ops.depth_to_space(x, m, 2),
            )
            for m in ("blocks_first", "depth_first")
        ],
        *[
            Case(
                f"SpaceToDepth-{m}",
                "SpaceToDepth",
                [P(_r(1, 2, 4, 6))],
                {"mode": m, "block_size": 2},
                lambda x, m=m: ops.space_to_depth(x, m, 2),
            )
            for m in ("blocks_first", "depth_first")
        ],
        Case(
            "ShuffleChannels",
            "ShuffleChannels",
            [P(_r(2, 6, 2, 2))],
            {"axis": 1, "group": 3},
            lambda x: opset3.shuffle_channels(x, 1, 3),
        ),
        Case(
            "ReverseSequence",
            "ReverseSequence",
            [P(_r(3, 5, 2)), C(_i(5, 2, 0))],
            {"batch_axis": 0, "seq_axis": 1},
            lambda x, s: ops.reverse_sequence(x, s, 0, 1),
        ),
    ]


REDUCE = {
    "ReduceSum": ops.reduce_sum,
    "ReduceMean": ops.reduce_mean,
    "ReduceMax": ops.reduce_max,
    "ReduceMin": ops.reduce_min,
    "ReduceProd": ops.reduce_prod,
}


def _reduce_cases():
    cases = []
    for name, fn in REDUCE.items():
        for axes, keep in ((_i(1, -1), False), (_i(0), True)):
            cases.append(
                Case(
                    f"{name}-{len(axes)}-{keep}",
                    name,
                    [P(_r(2, 3, 4)), C(axes)],
                    {"keep_dims": keep},
                    lambda x, a, fn=fn, keep=keep: fn(x, a, keep),
                )
            )
    for name, fn in {"ReduceLogicalAnd": ops.reduce_logical_and, "ReduceLogicalOr": ops.reduce_logical_or}.items():
        cases.append(Case(name, name, [P(BOOLS), C(_i(1))], {"keep_dims": True}, lambda x, a, fn=fn: fn(x, a, True)))
    return cases


def _norm_cases():
    return [
        Case("SoftMax", "SoftMax", [P(X)], {"axis": 2}, lambda x: ops.softmax(x, 2)),
        *[
            Case(
                f"MVN-{ac}-{nv}",
                "MVN",
                [P(X)],
                {"across_channels": ac, "normalize_variance": nv, "eps": 0.1},
                lambda x, ac=ac, nv=nv: opset2.mvn(x, ac, nv, 0.1),
            )
            for ac in (False, True)
            for nv in (False, True)
        ],
        *[
            Case(
                f"NormalizeL2-{m}",
                "NormalizeL2",
                [P(X), C(_i(1))],
                {"eps": 0.5, "eps_mode": m},
                lambda x, a, m=m: ops.normalize_l2(x, a, 0.5, m),
            )
            for m in ("add",)
        ],
        # eps_mode "max" is left out: the CPU plugin computes it as "add".
        Case(
            "BatchNormInference",
            "BatchNormInference",
            [C(_r(3, seed=1)), C(_r(3, seed=2)), P(X), C(_r(3, seed=3)), C(_r(3, low=0.5, high=2))],
            {"epsilon": 1e-3},
            lambda g, b, x, m, v: ops.batch_norm_inference(x, g, b, m, v, 1e-3),
        ),
        Case("GRN", "GRN", [P(X)], {"bias": 0.5}, lambda x: ops.grn(x, 0.5)),
        # LRN: bias 1 only, as the CPU plugin ignores bias (computes with 1); it runs only axes [1] and
        # [2, 3] (it treats [1, 2, 3] as [2, 3] and refuses other axes).
        *[
            Case(
                f"LRN-{'-'.join(map(str, axes))}-s{size}",
                "LRN",
                [P(X * 3), C(_i(*axes))],
                {"alpha": 0.6, "beta": 0.75, "bias": 1.0, "size": size},
                lambda x, a, size=size: ops.lrn(x, a, 0.6, 0.75, 1.0, size),
            )
            for axes in ((1,), (2, 3))
            for size in (1, 2, 3, 4, 5)
        ],
    ]


RESIZE_IMG = _r(1, 2, 6, 5, seed=12)


def _interpolate_case(tag, mode, target, align=False, axes=(2, 3), antialias=False, pads=None, data=RESIZE_IMG):
    attrs = {"axes": list(axes), "mode": mode, "align_corners": align, "antialias": antialias}
    if pads:
        attrs.update(pads_begin=list(pads[0]), pads_end=list(pads[1]))
    ov_attrs = dict(attrs, pads_begin=attrs.get("pads_begin", [0]), pads_end=attrs.get("pads_end", [0]))
    return Case(
        f"Interpolate-{mode}-ac{int(align)}-{tag}",
        "Interpolate",
        [P(data), C(_i(*target))],
        attrs,
        lambda x, t, a=ov_attrs: ops.interpolate(x, t, a),
    )


def _interpolate_cases():
    # Left out: mode "area" (the CPU plugin refuses it for Interpolate-1), antialias (the CPU plugin ignores
    # it), cubic over the channel axis and unsorted axes (the CPU plugin disagrees with the specification).
    cases = []
    for mode in ("nearest", "linear", "cubic"):
        for align in (False, True):
            for tag, target in (("up", (9, 8)), ("down", (3, 4)), ("mixed", (4, 10)), ("same", (6, 5))):
                cases.append(_interpolate_case(tag, mode, target, align))
            cases.append(_interpolate_case("pads", mode, (7, 12), align, pads=((0, 0, 1, 0), (0, 0, 2, 1))))
            cases.append(_interpolate_case("axis3", mode, (3,), align, axes=(3,)))
            cases.append(_interpolate_case("rank3", mode, (3, 8), align, axes=(1, 2), data=_r(2, 6, 5, seed=13)))
            cases.append(
                _interpolate_case("rank5", mode, (3, 9, 4), align, axes=(2, 3, 4), data=_r(1, 2, 4, 6, 5, seed=14))
            )
    cases.append(_interpolate_case("channels", "linear", (3, 3, 7), axes=(1, 2, 3)))
    cases.append(_interpolate_case("channels", "nearest", (3, 3, 7), axes=(1, 2, 3)))
    return cases


def _sort_cases():
    data = np.random.default_rng(5).permutation(60).astype(np.float32).reshape(3, 4, 5)
    cases = []
    for mode in ("max", "min"):
        for sort in ("value", "index"):
            cases.append(
                Case(
                    f"TopK-{mode}-{sort}",
                    "TopK",
                    [P(data), C(np.int64(3))],
                    {"axis": 2, "mode": mode, "sort": sort, "index_element_type": "int32"},
                    lambda x, k, mode=mode, sort=sort: ops.topk(x, k, 2, mode, sort),
                    outputs=2,
                )
            )
    return cases


def _nms_boxes(count: int, seed: int) -> np.ndarray:
    """Corner boxes (y1, x1, y2, x2) clustered so that many overlap, some with swapped corners."""
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, 4, (2, count, 2))
    boxes = np.concatenate([start, start + rng.uniform(0.5, 3, (2, count, 2))], axis=-1)
    boxes[:, ::4] = boxes[:, ::4][..., [2, 3, 0, 1]]  # the runtime accepts corners in either order
    return boxes.astype(np.float32)


def _nms_cases():
    boxes = _nms_boxes(10, 20)
    center = boxes.copy()  # the same boxes as (x_center, y_center, width, height)
    center[..., :2] = (boxes[..., [1, 0]] + boxes[..., [3, 2]]) / 2
    center[..., 2:] = np.abs(boxes[..., [3, 2]] - boxes[..., [1, 0]])
    # Distinct scores: ties would leave the order to the implementation.
    scores = np.random.default_rng(21).permutation(2 * 3 * 10).astype(np.float32).reshape(2, 3, 10) / 60
    cases = []
    for encoding, data in (("corner", boxes), ("center", center)):
        for descending in (True, False):
            for limit, iou, threshold in ((3, 0.4, 0.2), (10, 0.2, 0.1)):
                cases.append(
                    Case(
                        f"NonMaxSuppression-{encoding}-desc{int(descending)}-k{limit}",
                        "NonMaxSuppression",
                        [P(data), P(scores), C(np.int64(limit)), C(np.float32(iou)), C(np.float32(threshold))],
                        {"box_encoding": encoding, "sort_result_descending": descending},
                        lambda b, s, k, i, t, e=encoding, d=descending: ops.non_max_suppression(b, s, k, i, t, e, d),
                    )
                )
    return cases


def _rnn_cases():
    b, i, h = 2, 3, 4
    x, h0, c0 = _r(b, i, seed=1), _r(b, h, seed=2), _r(b, h, seed=3)
    return [
        Case(
            "LSTMCell",
            "LSTMCell",
            [P(x), P(h0), P(c0), C(_r(4 * h, i)), C(_r(4 * h, h)), C(_r(4 * h))],
            {"hidden_size": h},
            lambda *a: ops.lstm_cell(*a, h),
            outputs=2,
        ),
        Case(
            "LSTMCell-clip",
            "LSTMCell",
            [P(x), P(h0), P(c0), C(_r(4 * h, i)), C(_r(4 * h, h)), C(_r(4 * h))],
            {"hidden_size": h, "clip": 0.5, "activations": ["tanh", "sigmoid", "relu"]},
            lambda *a: ops.lstm_cell(*a, h, activations=["tanh", "sigmoid", "relu"], clip=0.5),
            outputs=2,
        ),
        Case(
            "RNNCell",
            "RNNCell",
            [P(x), P(h0), C(_r(h, i)), C(_r(h, h)), C(_r(h))],
            {"hidden_size": h},
            lambda *a: opset3.rnn_cell(*a, h, ["tanh"], [], []),
        ),
        Case(
            "RNNCell-relu",
            "RNNCell",
            [P(x), P(h0), C(_r(h, i)), C(_r(h, h)), C(_r(h))],
            {"hidden_size": h, "activations": ["relu"], "clip": 1.0},
            lambda *a: opset3.rnn_cell(*a, h, ["relu"], [], [], 1.0),
        ),
    ]


def _sequence_cases():
    data = _r(6, 2, 4, seed=4)
    mask = np.ones((6, 2), np.float32)
    mask[4:, 1] = 0
    steps = np.random.default_rng(1).integers(0, 5, (5, 2, 3)).astype(np.int32)
    parents = np.random.default_rng(2).integers(0, 3, (5, 2, 3)).astype(np.int32)
    return [
        *[
            Case(
                f"CTCGreedyDecoder-{m}",
                "CTCGreedyDecoder",
                [P(data), C(mask)],
                {"ctc_merge_repeated": m},
                lambda d, s, m=m: ops.ctc_greedy_decoder(d, s, m),
            )
            for m in (True, False)
        ],
        Case(
            "GatherTree", "GatherTree", [P(steps), P(parents), C(np.int32([5, 3])), C(np.int32(4))], {}, ops.gather_tree
        ),
    ]


CASES = (
    _elementwise_cases()
    + _conv_cases()
    + _pool_cases()
    + _matmul_cases()
    + _shape_cases()
    + _reduce_cases()
    + _norm_cases()
    + _interpolate_cases()
    + _sort_cases()
    + _nms_cases()
    + _rnn_cases()
    + _sequence_cases()
)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_op_matches_openvino(case):
    check(case)


def test_missing_kernel_names_the_layer():
    model = _opconv_model(Case("Abs", "Abs", [P(X)], {}, None))
    model.graph.nodes[0].op = "NoSuchOp"
    with pytest.raises(ExecutionError, match="NoSuchOp"):
        Session(model)

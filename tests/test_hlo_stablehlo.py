"""StableHLO export checked by IREE: every exported HLO op runs in IREE and matches opconv's HLO executor
and/or an independent numpy formula on the same random inputs.

All cases are functions (``@case_N``) of ONE module compiled once per session
(compiling costs seconds per module).  Each case carries a numpy formula when
one is short; the HLO executor is compared too whenever it has the op's kernel.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import pytest

import opconv
from opconv.dialects.hlo.build import OPSETS, hlo_node
from opconv.dialects.hlo.stablehlo import (
    StableHloExportError,
    export,
    export_function,
    exportable_ops,
    module_text,
    weight_arguments,
)
from opconv.errors import ExecutionError
from opconv.ir import Graph, Model
from opconv.types import TensorType, from_numpy

iree_runtime = pytest.importorskip("tests.iree_runtime")

RNG = np.random.default_rng(20261123)


# -- building cases -----------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    """An operand held as a graph constant rather than fed."""

    array: np.ndarray


@dataclass(frozen=True)
class Typ:
    """An output known only by its type (no numpy formula; the executor is the oracle)."""

    dtype: str
    shape: tuple


@dataclass
class Case:
    id: str
    model: Model
    feeds: dict
    expected: list | None  # numpy formula results, or None
    rtol: float
    atol: float
    ops: set = field(default_factory=set)
    check: object = None  # for random ops: a function of the outputs (IREE's or the executor's) instead of oracles


CASES: list[Case] = []


def _type_of(out) -> TensorType:
    if isinstance(out, Typ):
        return TensorType(out.dtype, tuple(out.shape))
    out = np.asarray(out)
    return TensorType(from_numpy(out.dtype).name, out.shape)


def _add_operands(graph: Graph, args, feeds: dict, prefix: str = "x"):
    values = []
    for a in args:
        if a is None:
            values.append(None)
        elif isinstance(a, Const):
            values.append(graph.const(np.asarray(a.array), f"c{len(graph.initializers)}"))
        else:
            a = np.asarray(a)
            v = graph.add_input(f"{prefix}{len(feeds)}", TensorType(from_numpy(a.dtype).name, a.shape))
            feeds[v.name] = a
            values.append(v)
    return values


def add_case(case_id: str, op: str, args, outs, *, rtol=1e-5, atol=1e-6, **attrs):
    """One HLO node ``op`` on ``args``; ``outs`` are numpy results (types + formula) or :class:`Typ`."""
    graph, feeds = Graph(case_id), {}
    values = _add_operands(graph, args, feeds)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    produced = hlo_node(graph, op, *values, _outputs=len(outs), **attrs)
    produced = produced if isinstance(produced, list) else [produced]
    for v, out in zip(produced, outs):
        v.type = _type_of(out)
    graph.outputs = produced
    expected = None if any(isinstance(o, Typ) for o in outs) else [np.asarray(o) for o in outs]
    add_model_case(case_id, Model(graph, "hlo", dict(OPSETS)), feeds, expected, rtol=rtol, atol=atol)


def add_model_case(case_id, model, feeds, expected, *, rtol=1e-5, atol=1e-6, check=None):
    ops = {n.op for n in model.graph.walk()}
    CASES.append(Case(case_id, model, feeds, expected, rtol, atol, ops, check))


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def f64(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape)


def i32(*shape, low=-20, high=20):
    return RNG.integers(low, high, shape).astype(np.int32)


def boolean(*shape):
    return RNG.random(shape) < 0.5


# -- element-wise ---------------------------------------------------------------------

_erf = np.vectorize(math.erf)

x = f32(3, 4)
pos = f32(3, 4, low=0.1, high=3)
unit = f32(3, 4, low=-0.9, high=0.9)
halves = np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, 0.4, -0.6], [3.5, -3.5, 0.0, 7.2]], np.float32)
for op, arg, formula in [
    ("Abs", x, np.abs),
    ("Ceil", x, np.ceil),
    ("Floor", x, np.floor),
    ("Cos", x, np.cos),
    ("Sin", x, np.sin),
    ("Tan", unit, np.tan),
    ("Tanh", x, np.tanh),
    ("Exp", x, np.exp),
    ("Expm1", x, np.expm1),
    ("Log", pos, np.log),
    ("Log1p", pos, np.log1p),
    ("Neg", x, np.negative),
    ("Sign", halves, np.sign),
    ("Sqrt", pos, np.sqrt),
    ("Rsqrt", pos, lambda a: 1 / np.sqrt(a)),
    ("Cbrt", x, np.cbrt),
    ("Sigmoid", x, lambda a: 1 / (1 + np.exp(-a))),
    ("Round", halves, lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5)),
    ("RoundNearestEven", halves, np.round),
    ("Erf", x, _erf),
    ("Acos", unit, np.arccos),
    ("Asin", unit, np.arcsin),
    ("Asinh", x, np.arcsinh),
    ("Atan", x, np.arctan),
    ("Atanh", unit, np.arctanh),
    ("Sinh", x, np.sinh),
]:
    add_case(f"{op}_f32", op, [arg], formula(arg.astype(np.float64)).astype(np.float32), rtol=2e-5, atol=2e-6)

xd = f64(2, 5)
for op, formula in [("Exp", np.exp), ("Log1p", lambda a: np.log1p(np.abs(a))), ("Erf", _erf)]:
    arg = np.abs(xd) if op == "Log1p" else xd
    add_case(f"{op}_f64", op, [arg], formula(arg), rtol=1e-12, atol=1e-13)

add_case(
    "Cbrt_int", "Cbrt", [np.array([-27, -8, 0, 1, 64], np.int32)], np.array([-3, -2, 0, 1, 4], np.float32), rtol=1e-6
)
add_case("Expm1_int", "Expm1", [np.array([0, 1, 2], np.int32)], np.expm1(np.array([0, 1, 2.0])).astype(np.float32))
special = np.array([1.0, np.inf, -np.inf, np.nan, -0.0, 3e38], np.float32)
add_case("IsFinite", "IsFinite", [special], np.isfinite(special))
b1, b2 = boolean(2, 3), boolean(2, 3)
add_case("Not", "Not", [b1], ~b1)
u8 = RNG.integers(0, 256, (7,)).astype(np.uint8)
add_case("PopulationCount", "PopulationCount", [u8], np.unpackbits(u8[:, None], axis=1).sum(1).astype(np.uint8))
add_case("Copy", "Copy", [x], x)

y = f32(3, 4)
ypos = f32(3, 4, low=0.5, high=2)
for op, args, formula in [
    ("Add", (x, y), np.add),
    ("Sub", (x, y), np.subtract),
    ("Div", (x, ypos), np.divide),
    ("Max", (x, y), np.maximum),
    ("Min", (x, y), np.minimum),
    ("Atan2", (x, y), np.arctan2),
    ("Rem", (x * 3, ypos), np.fmod),
    ("Pow", (pos, y), np.power),
]:
    a, b = args
    add_case(f"{op}_f32", op, [a, b], formula(a.astype(np.float64), b).astype(np.float32), rtol=2e-5, atol=2e-6)
for op, formula in [("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)]:
    add_case(op, op, [b1, b2], formula(b1, b2))
ia, ib = i32(4, 3), i32(4, 3, low=1, high=7) * np.where(boolean(4, 3), 1, -1).astype(np.int32)
add_case("Div_int_truncates", "Div", [ia, ib], (np.trunc(ia / ib)).astype(np.int32))
add_case("Rem_int", "Rem", [ia, ib], np.fmod(ia, ib).astype(np.int32))
add_case("Add_int64", "Add", [ia.astype(np.int64), ib.astype(np.int64)], (ia + ib).astype(np.int64))
add_case("Max_int", "Max", [ia, ib], np.maximum(ia, ib))
shifts = RNG.integers(0, 8, (4, 3)).astype(np.int32)
add_case("ShiftLeft", "ShiftLeft", [ia, shifts], np.left_shift(ia, shifts))
add_case("ShiftRightArithmetic", "ShiftRightArithmetic", [ia, shifts], np.right_shift(ia, shifts))
add_case(
    "ShiftRightLogical",
    "ShiftRightLogical",
    [ia.view(np.uint32), shifts.view(np.uint32)],
    np.right_shift(ia.view(np.uint32), shifts.view(np.uint32)),
)
add_case(
    "Pow_f32_int_exponent",
    "Pow",
    [x, np.full((3, 4), 3, np.int32)],
    (x.astype(np.float64) ** 3).astype(np.float32),
    rtol=2e-5,
)
xs = f32(2, 3, 4)
row = f32(3)
add_case("Add_broadcast_dimensions", "Add", [xs, row], xs + row[None, :, None], broadcast_dimensions=[1])
col = f32(1, 4)
add_case("Sub_numpy_broadcast", "Sub", [xs, col], xs - col)
add_case("Complex", "Complex", [x, y], (x + 1j * y).astype(np.complex64))
z = (x + 1j * y).astype(np.complex64)
add_case("Real", "Real", [z], x)
add_case("Imag", "Imag", [z], y)
for direction, formula in [
    ("EQ", np.equal),
    ("NE", np.not_equal),
    ("GE", np.greater_equal),
    ("GT", np.greater),
    ("LE", np.less_equal),
    ("LT", np.less),
]:
    b = np.where(boolean(3, 4), x, y).astype(np.float32)  # some equal elements
    add_case(f"Compare_{direction}", "Compare", [x, b], formula(x, b), comparison_direction=direction)
add_case("Compare_int_GT", "Compare", [ia, ib], ia > ib, comparison_direction="GT")
pred = boolean(3, 4)
add_case("Select", "Select", [pred, x, y], np.where(pred, x, y))
add_case("Select_scalar_pred", "Select", [np.array(False), x, y], y)
add_case("Clamp_scalar_bounds", "Clamp", [np.float32(-0.5), x, np.float32(0.7)], np.clip(x, -0.5, 0.7))
lo = f32(3, 4, low=-1, high=0)
add_case("Clamp_tensor_bounds", "Clamp", [lo, x, lo + 1], np.minimum(np.maximum(x, lo), lo + 1))
add_case("Convert_f32_i32", "Convert", [x * 10], np.trunc(x * 10).astype(np.int32))
add_case("Convert_i32_f32", "Convert", [ia], ia.astype(np.float32))
add_case("Convert_f32_f16", "Convert", [x], x.astype(np.float16))
add_case("Convert_f32_f64", "Convert", [x], x.astype(np.float64))
add_case("BitcastConvert", "BitcastConvert", [x], x.view(np.int32))

# -- activations ---------------------------------------------------------------------------

xa = f32(2, 3, 8, low=-4, high=4)
xa64 = xa.astype(np.float64)


def _gelu(a, approximate=False):
    if approximate:
        return 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))
    return 0.5 * a * (1 + _erf(a / np.sqrt(2)))


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


for op, formula, attrs in [
    ("Relu", lambda a: np.maximum(a, 0), {}),
    ("Relu6", lambda a: np.clip(a, 0, 6), {}),
    ("LeakyRelu", lambda a: np.where(a >= 0, a, 0.1 * a), {"alpha": 0.1}),
    ("Elu", lambda a: np.where(a >= 0, a, 0.7 * np.expm1(a)), {"alpha": 0.7}),
    ("Gelu", _gelu, {"approximate": False}),
    ("Silu", lambda a: a * _sigmoid(a), {}),
    ("Swish", lambda a: a * _sigmoid(a), {}),
    ("Mish", lambda a: a * np.tanh(np.log1p(np.exp(a))), {}),
    ("HardSigmoid", lambda a: np.clip(0.3 * a + 0.4, 0, 1), {"slope": 0.3, "offset": 0.4}),
    ("HardSwish", lambda a: a * np.clip(a / 6 + 0.5, 0, 1), {}),
    ("Softplus", lambda a: np.where(2 * a > 3, a, np.log1p(np.exp(2 * a)) / 2), {"beta": 2.0, "threshold": 3.0}),
]:
    add_case(op, op, [xa], formula(xa64).astype(np.float32), rtol=2e-5, atol=2e-6, **attrs)
add_case("Gelu_tanh", "Gelu", [xa], _gelu(xa64, True).astype(np.float32), rtol=2e-5, atol=2e-6, approximate=True)
add_case("Relu_int", "Relu", [ia], np.maximum(ia, 0))
slope = f32(8)
add_case("PRelu", "PRelu", [xa, slope], np.where(xa >= 0, xa, slope * xa))
a_, b_ = xa64[..., :4], xa64[..., 4:]
add_case("Glu", "Glu", [xa], (a_ * _sigmoid(b_)).astype(np.float32), dim=-1)
add_case("GeGlu", "GeGlu", [xa], (a_ * _gelu(b_)).astype(np.float32), rtol=2e-5, atol=2e-6, dim=2, approximate=False)
a1, b1_ = xa64[:, :1], xa64[:, 1:2]
add_case("Gtu", "Gtu", [xa[:, :2]], (np.tanh(a1) * _sigmoid(b1_)).astype(np.float32), dim=1)

# -- shapes and data movement ------------------------------------------------------------------

t = f32(2, 3, 4)
add_case("Constant", "Constant", [], t, value=t)
add_case("Reshape", "Reshape", [t], t.reshape(4, 6))
add_case("DynamicReshape", "DynamicReshape", [t, Const(np.array([0, -1], np.int64))], t.reshape(2, 12))
add_case("Squeeze", "Squeeze", [t[:, :1], Const(np.array([1], np.int64))], t[:, 0])
add_case("Unsqueeze", "Unsqueeze", [t, Const(np.array([0, 3], np.int64))], t[None, :, :, None])
add_case("Transpose", "Transpose", [t], t.transpose(2, 0, 1), permutation=[2, 0, 1])
add_case("Broadcast", "Broadcast", [t], np.broadcast_to(t, (5, 2, 3, 4)), broadcast_sizes=[5])
add_case(
    "BroadcastInDim", "BroadcastInDim", [row], np.broadcast_to(row[None, :, None], (2, 3, 4)), broadcast_dimensions=[1]
)
add_case(
    "DynamicBroadcastInDim",
    "DynamicBroadcastInDim",
    [row, Const(np.array([2, 3, 4], np.int64))],
    np.broadcast_to(row[None, :, None], (2, 3, 4)),
    broadcast_dimensions=[1],
)
add_case("Concatenate", "Concatenate", [t, t[:, :1] + 1, t], np.concatenate([t, t[:, :1] + 1, t], axis=1), dimension=-2)
add_case(
    "Slice", "Slice", [t], t[1:2, 0:3:2, 1:4:2], start_indices=[1, 0, 1], limit_indices=[2, 3, 4], strides=[1, 2, 2]
)
add_case("SliceInDim", "SliceInDim", [t], t[:, :, 0:4:3], start_index=0, limit_index=4, stride=3, dim=2)
m = f32(5, 6)
add_case("DynamicSlice", "DynamicSlice", [m, np.array([1, 4], np.int32)], m[1:3, 3:6], slice_sizes=[2, 3])
upd = f32(2, 2)
dus = m.copy()
dus[3:5, 1:3] = upd
add_case("DynamicUpdateSlice", "DynamicUpdateSlice", [m, upd, np.array([3, 1], np.int64)], dus)
add_case("Reverse", "Reverse", [t], t[::-1, :, ::-1], dimensions=[0, 2])
add_case("Iota", "Iota", [], np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)), iota_dimension=1)
add_case(
    "DynamicIota",
    "DynamicIota",
    [Const(np.array([3, 2], np.int64))],
    np.broadcast_to(np.arange(3, dtype=np.int32)[:, None], (3, 2)),
    iota_dimension=0,
)
add_case("Shape", "Shape", [t], np.array([3, 4], np.int64), start=1)
add_case("Size", "Size", [t], np.array(24, np.int64))
add_case(
    "Pad_value",
    "Pad",
    [m, np.float32(9)],
    np.pad(np.insert(m, [1, 2, 3, 4], 9, axis=0), ((1, 0), (0, 0)), constant_values=9)[:, 1:4],
    edge_padding_low=[1, -1],
    edge_padding_high=[0, -2],
    interior_padding=[1, 0],
)
for mode, np_mode in [("PAD_EDGE", "edge"), ("PAD_REFLECT", "reflect"), ("PAD_SYMMETRIC", "symmetric")]:
    add_case(
        f"Pad_{mode}",
        "Pad",
        [m, np.float32(0)],
        np.pad(m, ((2, 1), (0, 3)), mode=np_mode),
        mode=mode,
        edge_padding_low=[2, 0],
        edge_padding_high=[1, 3],
        interior_padding=[0, 0],
    )
add_case(
    "DynamicPad",
    "DynamicPad",
    [m, Const(np.array([1, 2, 0, 1], np.int64)), np.float32(-1)],
    np.pad(m, ((1, 0), (2, 1)), constant_values=-1),
)
add_case(
    "DynamicPad_reflect",
    "DynamicPad",
    [m, Const(np.array([1, 2, 0, 1], np.int64))],
    np.pad(m, ((1, 0), (2, 1)), mode="reflect"),
    mode="PAD_REFLECT",
)
add_case("Tile", "Tile", [t, Const(np.array([2, 1, 3], np.int64))], np.tile(t, (2, 1, 3)))
add_case("GeneralSplit", "GeneralSplit", [m, Const(np.array([2, 4], np.int64))], [m[:, :2], m[:, 2:]], axis=1)
img = f32(2, 8, 2, 3)


def _d2s(a, b, mode):
    n, c, h, w_ = a.shape
    if mode == "DCR":
        return a.reshape(n, b, b, c // b // b, h, w_).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // b // b, h * b, w_ * b)
    return a.reshape(n, c // b // b, b, b, h, w_).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // b // b, h * b, w_ * b)


def _s2d(a, b):
    n, c, h, w_ = a.shape
    return a.reshape(n, c, h // b, b, w_ // b, b).transpose(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w_ // b)


add_case("DepthToSpace_DCR", "DepthToSpace", [img], _d2s(img, 2, "DCR"), space_dims=[2, 3], depth_dim=1, blocksize=2)
add_case(
    "DepthToSpace_CRD_NHWC",
    "DepthToSpace",
    [img.transpose(0, 2, 3, 1)],
    _d2s(img, 2, "CRD").transpose(0, 2, 3, 1),
    space_dims=[1, 2],
    depth_dim=3,
    blocksize=2,
    mode="CRD",
)
sp = f32(1, 2, 4, 6)
add_case("SpaceToDepth", "SpaceToDepth", [sp], _s2d(sp, 2), space_dims=[2, 3], depth_dim=1, blocksize=2)
add_case("Trilu_upper", "Trilu", [t], np.triu(t, 1), upper=True, k=1)
add_case("Trilu_lower", "Trilu", [t], np.tril(t, -1), upper=False, k=-1)
table = f32(6, 3)
rows = np.array([[4], [0], [5], [4]], np.int64)
add_case(
    "Gather_rows",
    "Gather",
    [table, rows],
    table[rows[:, 0]],
    index_vector_dim=1,
    start_index_map=[0],
    collapsed_slice_dims=[0],
    offset_dims=[1],
    slice_sizes=[1, 3],
)
updates = f32(4, 3)
scattered = table.copy()
np.add.at(scattered, rows[:, 0], updates)
scatter_attrs = dict(
    index_vector_dim=1, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0]
)
add_case("ScatterND_ADD", "ScatterND", [table, rows, updates], scattered, computation="ADD", **scatter_attrs)
unique_rows = np.array([[4], [0], [5]], np.int64)
replaced = table.copy()
replaced[unique_rows[:, 0]] = updates[:3]
add_case(
    "ScatterND_UPDATE",
    "ScatterND",
    [table, unique_rows, updates[:3]],
    replaced,
    computation="UPDATE",
    unique_indices=True,
    **scatter_attrs,
)

# -- dot, convolution, normalisation --------------------------------------------------------------

A, B = f32(3, 5), f32(5, 4)
add_case("Dot_matmat", "Dot", [A, B], A @ B)
add_case("Dot_matvec", "Dot", [A, B[:, 0].copy()], A @ B[:, 0])
bl, br = f32(2, 3, 5), f32(2, 5, 4)
add_case(
    "DotGeneral_batch",
    "DotGeneral",
    [bl, br],
    bl @ br,
    lhs_batching_dimensions=[0],
    rhs_batching_dimensions=[0],
    lhs_contracting_dimensions=[2],
    rhs_contracting_dimensions=[1],
)
bias4 = f32(4)
add_case(
    "DotGeneralBias",
    "DotGeneralBias",
    [A, B.T.copy(), bias4],
    A @ B + bias4,
    lhs_contracting_dimensions=[1],
    rhs_contracting_dimensions=[1],
)
C = f32(1, 4)
add_case("Gemm", "Gemm", [A.T.copy(), B.T.copy(), C], 0.5 * A @ B + 2 * C, alpha=0.5, beta=2.0, transA=1, transB=1)
add_case("Gemm_no_C", "Gemm", [A, B], A @ B)

NCHW = dict(
    input_batch_dimension=0,
    input_feature_dimension=1,
    input_spatial_dimensions=[2, 3],
    kernel_input_feature_dimension=1,
    kernel_output_feature_dimension=0,
    kernel_spatial_dimensions=[2, 3],
    output_batch_dimension=0,
    output_feature_dimension=1,
    output_spatial_dimensions=[2, 3],
)
NHWC = dict(
    input_batch_dimension=0,
    input_feature_dimension=3,
    input_spatial_dimensions=[1, 2],
    kernel_input_feature_dimension=2,
    kernel_output_feature_dimension=3,
    kernel_spatial_dimensions=[0, 1],
    output_batch_dimension=0,
    output_feature_dimension=3,
    output_spatial_dimensions=[1, 2],
)


def _conv_nchw(xin, wt, stride=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1):
    """Direct-loop grouped convolution, pads [top, left, bottom, right]."""
    xin = np.pad(xin.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, w_ = xin.shape
    o, cg, kh, kw = wt.shape
    oh = (h - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (w_ - (kw - 1) * dil[1] - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(kh):
            for j in range(kw):
                patch = xin[
                    :,
                    g * cg : (g + 1) * cg,
                    i * dil[0] : i * dil[0] + stride[0] * oh : stride[0],
                    j * dil[1] : j * dil[1] + stride[1] * ow : stride[1],
                ]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, wt[oc, :, i, j])
    return out.astype(np.float32)


cx, cw = f32(2, 4, 7, 6), f32(6, 2, 3, 2)
add_case(
    "Conv_grouped_strided",
    "Conv",
    [cx, cw],
    _conv_nchw(cx, cw, (2, 1), (1, 0, 1, 1), (1, 2), 2),
    rtol=1e-4,
    atol=1e-5,
    window_strides=[2, 1],
    padding=[1, 0, 1, 1],
    rhs_dilation=[1, 2],
    feature_group_count=2,
    **NCHW,
)
cw1 = f32(5, 4, 3, 3)
add_case(
    "Conv_same_upper",
    "Conv",
    [cx, cw1],
    _conv_nchw(cx, cw1, (2, 2), (1, 0, 1, 1)),
    rtol=1e-4,
    atol=1e-5,
    window_strides=[2, 2],
    auto_pad="SAME_UPPER",
    **NCHW,
)
add_case(
    "Conv_NHWC",
    "Conv",
    [cx.transpose(0, 2, 3, 1), cw1.transpose(2, 3, 1, 0)],
    _conv_nchw(cx, cw1, pads=(1, 1, 1, 1)).transpose(0, 2, 3, 1),
    rtol=1e-4,
    atol=1e-5,
    padding=[1, 1, 1, 1],
    **NHWC,
)
add_case(
    "Conv_lhs_dilation",
    "Conv",
    [cx, cw1],
    Typ("float32", (2, 5, 11, 9)),
    rtol=1e-4,
    atol=1e-5,
    lhs_dilation=[2, 2],
    **NCHW,
)
cb = f32(5)
add_case("ConvBias", "ConvBias", [cx, cw1, cb], _conv_nchw(cx, cw1) + cb[:, None, None], rtol=1e-4, atol=1e-5, **NCHW)

bx = f32(2, 3, 4, 5)
scale, shift, mean_, var_ = f32(3), f32(3), f32(3), f32(3, low=0.5, high=2)
bshape = (1, 3, 1, 1)
add_case(
    "BatchNormInference",
    "BatchNormInference",
    [bx, scale, shift, mean_, var_],
    (
        (bx - mean_.reshape(bshape)) / np.sqrt(var_.reshape(bshape) + 1e-3) * scale.reshape(bshape)
        + shift.reshape(bshape)
    ).astype(np.float32),
    rtol=1e-5,
    atol=1e-5,
    epsilon=1e-3,
    feature_index=1,
)
bm, bv = bx.mean(axis=(0, 2, 3)), bx.var(axis=(0, 2, 3))
add_case(
    "BatchNormTraining",
    "BatchNormTraining",
    [bx, scale, shift],
    [
        (
            (bx - bm.reshape(bshape)) / np.sqrt(bv.reshape(bshape) + 1e-3) * scale.reshape(bshape)
            + shift.reshape(bshape)
        ).astype(np.float32),
        bm,
        bv,
    ],
    rtol=1e-4,
    atol=1e-5,
    epsilon=1e-3,
    feature_index=1,
)
grad = f32(2, 3, 4, 5)
add_case(
    "BatchNormGrad",
    "BatchNormGrad",
    [bx, scale, bm, bv, grad],
    [Typ("float32", bx.shape), Typ("float32", (3,)), Typ("float32", (3,))],
    rtol=1e-4,
    atol=1e-4,
    epsilon=1e-3,
    feature_index=1,
)

lx = f32(2, 3, 8)
lmean = lx.astype(np.float64).mean(-1, keepdims=True)
lrstd = 1 / np.sqrt(lx.astype(np.float64).var(-1, keepdims=True) + 1e-5)
lscale, lbias = f32(8), f32(8)
add_case(
    "LayerNorm",
    "LayerNorm",
    [lx, lscale, lbias],
    [((lx - lmean) * lrstd * lscale + lbias).astype(np.float32), lmean.astype(np.float32), lrstd.astype(np.float32)],
    rtol=1e-4,
    atol=1e-5,
    axis=-1,
)
lm2 = lx.astype(np.float64).mean((1, 2), keepdims=True)
lr2 = 1 / np.sqrt(lx.astype(np.float64).var((1, 2), keepdims=True) + 1e-3)
ls2, lb2 = f32(3, 8), f32(3, 8)
graph_ln, feeds_ln = Graph("LayerNorm_axis1"), {}
vals = _add_operands(graph_ln, [lx, ls2, lb2], feeds_ln)
out_ln = hlo_node(graph_ln, "LayerNorm", *vals, _outputs=3, axis=1, epsilon=1e-3)
for v, arr in zip(out_ln, [lx, lm2, lr2]):
    v.type = _type_of(arr.astype(np.float32))
graph_ln.outputs = [out_ln[0]]  # mean and rstd unused
add_model_case(
    "LayerNorm_axis1_single_output",
    Model(graph_ln, "hlo", dict(OPSETS)),
    feeds_ln,
    [((lx - lm2) * lr2 * ls2 + lb2).astype(np.float32)],
    rtol=1e-4,
    atol=1e-5,
)

gx = f32(2, 6, 3, 2)
gg = gx.astype(np.float64).reshape(2, 3, -1)
gnorm = ((gg - gg.mean(-1, keepdims=True)) / np.sqrt(gg.var(-1, keepdims=True) + 1e-5)).reshape(gx.shape)
gs, gb = f32(6), f32(6)
add_case(
    "GroupNorm",
    "GroupNorm",
    [gx, gs, gb],
    (gnorm * gs[:, None, None] + gb[:, None, None]).astype(np.float32),
    rtol=1e-4,
    atol=1e-5,
    num_groups=3,
)
im = gx.astype(np.float64)
inorm = (im - im.mean((2, 3), keepdims=True)) / np.sqrt(im.var((2, 3), keepdims=True) + 1e-5)
add_case(
    "InstanceNorm",
    "InstanceNorm",
    [gx, gs, gb],
    (inorm * gs[:, None, None] + gb[:, None, None]).astype(np.float32),
    rtol=1e-4,
    atol=1e-5,
)

sx = f32(3, 5, low=-5, high=5)
se = np.exp(sx.astype(np.float64))
add_case("Softmax", "Softmax", [sx], (se / se.sum(-1, keepdims=True)).astype(np.float32), rtol=1e-5)
se0 = np.exp(sx.astype(np.float64) - sx.max(0))
add_case(
    "Softmax_accurate_log_axis0",
    "Softmax",
    [sx],
    np.log(se0 / se0.sum(0, keepdims=True)).astype(np.float32),
    rtol=1e-5,
    atol=1e-5,
    axis=0,
    accurate=True,
    logarithmic=True,
)
add_case(
    "Softmax_epsilon",
    "Softmax",
    [sx * 0 - 30],
    np.full((3, 5), np.exp(-30) / 1e-3, np.float32),
    rtol=1e-5,
    epsilon=1e-3,
)

# -- pooling ------------------------------------------------------------------------------


def _pool(a, kernel, stride, pads, mode, count_include_pad=False, out=None):
    """Loop pooling over the last two dims; pads [top, left, bottom, right]; out: output size (ceil mode)."""
    n, c, h, w_ = a.shape
    oh, ow = out or (
        (h + pads[0] + pads[2] - kernel[0]) // stride[0] + 1,
        (w_ + pads[1] + pads[3] - kernel[1]) // stride[1] + 1,
    )
    res = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * stride[0] - pads[0], j * stride[1] - pads[1]
            r1, c1 = r0 + kernel[0], c0 + kernel[1]
            window = a[:, :, max(r0, 0) : min(r1, h), max(c0, 0) : min(c1, w_)].astype(np.float64)
            if mode == "max":
                res[:, :, i, j] = window.max((2, 3))
            else:
                if count_include_pad:
                    count = (min(r1, h + pads[2]) - max(r0, -pads[0])) * (min(c1, w_ + pads[3]) - max(c0, -pads[1]))
                else:
                    count = window.shape[2] * window.shape[3]
                res[:, :, i, j] = window.sum((2, 3)) / count
    return res.astype(np.float32)


px = f32(2, 3, 7, 6)
add_case(
    "MaxPool",
    "MaxPool",
    [px],
    _pool(px, (3, 2), (2, 2), (1, 0, 1, 1), "max"),
    kernel_shape=[3, 2],
    strides=[2, 2],
    padding=[1, 0, 1, 1],
)
add_case(
    "MaxPool_ceil",
    "MaxPool",
    [px],
    _pool(px, (2, 2), (2, 2), (0, 0, 0, 0), "max", out=(4, 3)),
    kernel_shape=[2, 2],
    strides=[2, 2],
    ceil_mode=True,
)


def _max_pool_indices(a, kernel, stride, pads, column_major=False):
    """Loop max pooling with ONNX's flat argmax indices (first maximum in row-major window order)."""
    n, c, h, w_ = a.shape
    oh = (h + pads[0] + pads[2] - kernel[0]) // stride[0] + 1
    ow = (w_ + pads[1] + pads[3] - kernel[1]) // stride[1] + 1
    values, indices = np.zeros((n, c, oh, ow), a.dtype), np.zeros((n, c, oh, ow), np.int64)
    for b_i, c_i, i, j in np.ndindex(n, c, oh, ow):
        best = None
        for r in range(i * stride[0] - pads[0], i * stride[0] - pads[0] + kernel[0]):
            for q in range(j * stride[1] - pads[1], j * stride[1] - pads[1] + kernel[1]):
                if 0 <= r < h and 0 <= q < w_ and (best is None or a[b_i, c_i, r, q] > best[0]):
                    best = (a[b_i, c_i, r, q], r, q)
        spatial = best[2] * h + best[1] if column_major else best[1] * w_ + best[2]
        values[b_i, c_i, i, j], indices[b_i, c_i, i, j] = best[0], (b_i * c + c_i) * h * w_ + spatial
    return values, indices


add_case(
    "MaxPool_indices",
    "MaxPool",
    [px],
    list(_max_pool_indices(px, (3, 2), (2, 2), (1, 0, 1, 1))),
    kernel_shape=[3, 2],
    strides=[2, 2],
    padding=[1, 0, 1, 1],
    return_indices=True,
)
ties = np.round(px * 2) / 2  # many equal maxima
add_case(
    "MaxPool_indices_ties_column_major",
    "MaxPool",
    [ties],
    list(_max_pool_indices(ties, (2, 3), (1, 2), (0, 1, 0, 1), column_major=True)),
    kernel_shape=[2, 3],
    strides=[1, 2],
    padding=[0, 1, 0, 1],
    return_indices=True,
    storage_order=1,
)
add_case(
    "AveragePool_exclude_pad",
    "AveragePool",
    [px],
    _pool(px, (3, 3), (2, 2), (1, 1, 1, 1), "avg"),
    dims=[2, 3],
    kernel_shape=[3, 3],
    strides=[2, 2],
    padding=[1, 1, 1, 1],
)
add_case(
    "AveragePool_include_pad_ceil",
    "AveragePool",
    [px],
    _pool(px, (3, 3), (2, 2), (1, 1, 1, 1), "avg", True, out=(4, 4)),
    dims=[2, 3],
    kernel_shape=[3, 3],
    strides=[2, 2],
    padding=[1, 1, 1, 1],
    count_include_pad=True,
    ceil_mode=True,
)
add_case(
    "AveragePool_NHWC_same",
    "AveragePool",
    [px.transpose(0, 2, 3, 1)],
    _pool(px, (3, 3), (1, 1), (1, 1, 1, 1), "avg").transpose(0, 2, 3, 1),
    dims=[1, 2],
    kernel_shape=[3, 3],
    auto_pad="SAME_UPPER",
)
add_case("GlobalAveragePool", "GlobalAveragePool", [px], px.mean((2, 3), keepdims=True), dims=[2, 3])
add_case("GlobalMaxPool", "GlobalMaxPool", [px], px.max((2, 3), keepdims=True), dims=[2, 3])

# -- reductions and regions ---------------------------------------------------------------------

rx = f32(3, 4, 5)
add_case(
    "Reduce_ADD",
    "Reduce",
    [rx, np.float32(1)],
    rx.sum((0, 2)) + 1,
    rtol=1e-5,
    atol=1e-5,
    dimensions=[0, 2],
    computation="ADD",
)
add_case("Reduce_MAX", "Reduce", [rx, np.float32(-np.inf)], rx.max(1), dimensions=[1], computation="MAX")
ri = i32(3, 4, low=-3, high=4)
add_case(
    "Reduce_MUL_int", "Reduce", [ri, np.int32(2)], (2 * ri.prod(0)).astype(np.int32), dimensions=[0], computation="MUL"
)
add_case(
    "Reduce_SUB",
    "Reduce",
    [rx, np.float32(10)],
    10 - rx.sum(2),
    rtol=1e-5,
    atol=1e-5,
    dimensions=[2],
    computation="SUB",
)
add_case(
    "Reduce_L2",
    "Reduce",
    [rx, np.float32(0)],
    np.sqrt((rx.astype(np.float64) ** 2).sum(2)).astype(np.float32),
    dimensions=[2],
    computation="L2",
)
add_case(
    "Reduce_COUNT", "Reduce", [rx, np.float32(0)], np.full((3, 5), 4, np.float32), dimensions=[1], computation="COUNT"
)
add_case("Reduce_UPDATE", "Reduce", [rx, np.float32(0)], rx[:, -1, -1], dimensions=[1, 2], computation="UPDATE")
rb = boolean(3, 4)
add_case("Reduce_AND", "Reduce", [rb, np.bool_(True)], rb.all(1), dimensions=[1], computation="AND")
tied = np.array([[1, 5, 5, 2], [7, 7, 0, 7], [3, 1, 3, 0]], np.float32)
carry = f32(3, 4)
first = tied.argmax(1)
add_case(
    "Reduce_MAX_variadic",
    "Reduce",
    [tied, carry, np.float32(-np.inf), np.float32(0)],
    [tied.max(1), carry[np.arange(3), first]],
    dimensions=[1],
    computation="MAX",
)
add_case("ArgMax", "ArgMax", [tied], tied.argmax(1)[:, None].astype(np.int64), axis=1)
add_case(
    "ArgMax_last",
    "ArgMax",
    [tied],
    (3 - tied[:, ::-1].argmax(1)).astype(np.int64),
    axis=1,
    keepdims=False,
    select_last_index=True,
)
add_case("ArgMin_axis0", "ArgMin", [tied], tied.argmin(0)[None].astype(np.int64), axis=0)
nan_row = np.array([[1, np.nan, 3, np.nan]], np.float32)
add_case("ArgMax_nan", "ArgMax", [nan_row], np.array([1], np.int64), axis=1, keepdims=False)


def _reduce_window_sum(a, window, strides, low, high, init):
    a = np.pad(a.astype(np.float64), list(zip(low, high)))
    out_shape = [(s - k) // st + 1 for s, k, st in zip(a.shape, window, strides)]
    res = np.full(out_shape, float(init))
    for idx in np.ndindex(*out_shape):
        sl = tuple(slice(i * st, i * st + k) for i, st, k in zip(idx, strides, window))
        res[idx] += a[sl].sum()
    return res.astype(np.float32)


wx = f32(2, 5, 6)
add_case(
    "ReduceWindow_ADD_same",
    "ReduceWindow",
    [wx, np.float32(0.5)],
    _reduce_window_sum(wx, (1, 3, 3), (1, 2, 2), (0, 1, 0), (0, 1, 1), 0.5),
    rtol=1e-5,
    atol=1e-5,
    computation="ADD",
    window_dimensions=[1, 3, 3],
    window_strides=[1, 2, 2],
    auto_pad="SAME_UPPER",
)
add_case(
    "ReduceWindow_MAX_dilated",
    "ReduceWindow",
    [wx, np.float32(-np.inf)],
    Typ("float32", (2, 3, 10)),
    computation="MAX",
    window_dimensions=[1, 2, 2],
    base_dilations=[1, 1, 2],
    window_dilations=[1, 2, 1],
)
sel_x = f32(4, 6)
sel_src = f32(2, 3)
sel_expected = np.zeros((4, 6), np.float32)
for i in range(2):
    for j in range(3):
        win = sel_x[2 * i : 2 * i + 2, 2 * j : 2 * j + 2]
        r, c = np.unravel_index(np.argmax(win), win.shape)
        sel_expected[2 * i + r, 2 * j + c] += sel_src[i, j]
add_case(
    "SelectAndScatter",
    "SelectAndScatter",
    [sel_x, sel_src, np.float32(0)],
    sel_expected,
    select_type="GE",
    computation="ADD",
    window_dimensions=[2, 2],
    window_strides=[2, 2],
    padding=[0, 0, 0, 0],
)
keys = f32(3, 6)
payload = i32(3, 6)
order = np.argsort(-keys, axis=1, kind="stable")
add_case(
    "Sort_descending_two_inputs",
    "Sort",
    [keys, payload],
    [np.take_along_axis(keys, order, 1), np.take_along_axis(payload, order, 1)],
    dimension=1,
    descending=True,
    is_stable=True,
)
add_case("Sort_axis0", "Sort", [keys], np.sort(keys, axis=0), dimension=0, descending=False)
tk = np.array([[3, 1, 4, 1, 5, 9, 2, 6], [5, 3, 5, 8, 9, 7, 9, 3]], np.float32)
top_order = np.argsort(-tk, axis=1, kind="stable")[:, :3]
add_case(
    "Topk_largest",
    "Topk",
    [tk, Const(np.array([3], np.int64))],
    [np.take_along_axis(tk, top_order, 1), top_order.astype(np.int64)],
    axis=1,
)
low_order = np.argsort(tk, axis=1, kind="stable")[:, :2]
add_case(
    "Topk_smallest_int32_indices",
    "Topk",
    [tk, Const(np.array([2], np.int64))],
    [np.take_along_axis(tk, low_order, 1), low_order.astype(np.int32)],
    largest=False,
)


def _region(inputs, build):
    """A region graph with scalar/tensor parameters ``inputs`` [(name, dtype, shape)] and results ``build``."""
    g = Graph("region")
    params = [g.add_input(name, TensorType(dtype, shape)) for name, dtype, shape in inputs]
    outs = build(g, *params)
    g.outputs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return g


def _typed(value, dtype, shape):
    value.type = TensorType(dtype, tuple(shape))
    return value


mx, my = f32(3, 4), f32(3, 4)
map_region = _region(
    [("a", "float32", ()), ("b", "float32", ())],
    lambda g, a, b: _typed(hlo_node(g, "Max", _typed(hlo_node(g, "Add", a, b), "float32", ()), a), "float32", ()),
)
add_case("Map", "Map", [mx, my], np.maximum(mx + my, mx), dimensions=[0, 1], computation=map_region)


def _while_model():
    g, feeds = Graph("While"), {}
    counter, acc = _add_operands(g, [np.int32(0), f32(2, 3)], feeds)
    limit = g.const(np.int32(4), "limit")

    def cond(r, i, a):
        return _typed(hlo_node(r, "Compare", i, limit, comparison_direction="LT"), "bool", ())

    def body(r, i, a):
        one = r.const(np.int32(1), "one")
        return [
            _typed(hlo_node(r, "Add", i, one), "int32", ()),
            _typed(hlo_node(r, "Add", a, _typed(hlo_node(r, "Tanh", a), "float32", (2, 3))), "float32", (2, 3)),
        ]

    params = [("i", "int32", ()), ("a", "float32", (2, 3))]
    outs = hlo_node(g, "While", counter, acc, _outputs=2, cond=_region(params, cond), body=_region(params, body))
    _typed(outs[0], "int32", ())
    _typed(outs[1], "float32", (2, 3))
    g.outputs = outs
    a = feeds["x1"].astype(np.float64)
    for _ in range(4):
        a = a + np.tanh(a)
    return Model(g, "hlo", dict(OPSETS)), feeds, [np.int32(4), a.astype(np.float32)]


def _if_model(flag):
    g, feeds = Graph("If"), {}
    p, a = _add_operands(g, [np.bool_(flag), f32(2, 3)], feeds)
    then = _region([], lambda r: _typed(hlo_node(r, "Exp", a), "float32", (2, 3)))
    other = _region([], lambda r: _typed(hlo_node(r, "Neg", a), "float32", (2, 3)))
    out = _typed(hlo_node(g, "If", p, true_branch=then, false_branch=other), "float32", (2, 3))
    g.outputs = [out]
    value = feeds["x1"]
    return Model(g, "hlo", dict(OPSETS)), feeds, [np.exp(value) if flag else -value]


def _tuple_model():
    g, feeds = Graph("Tuple"), {}
    a, b = _add_operands(g, [f32(2), i32(3)], feeds)
    tup = hlo_node(g, "Tuple", a, b)
    second = _typed(hlo_node(g, "GetTupleElement", tup, index=1), "int32", (3,))
    g.outputs = [second]
    return Model(g, "hlo", dict(OPSETS)), feeds, [feeds["x1"]]


model, feeds, expected = _while_model()
add_model_case("While", model, feeds, expected, rtol=1e-5)
for flag in (True, False):
    model, feeds, expected = _if_model(flag)
    add_model_case(f"If_{flag}", model, feeds, expected)
model, feeds, expected = _tuple_model()
add_model_case("Tuple_GetTupleElement", model, feeds, expected)

# -- others -----------------------------------------------------------------------------------

spd = f32(2, 4, 4)
spd = spd @ spd.transpose(0, 2, 1) + 4 * np.eye(4, dtype=np.float32)
add_case(
    "Cholesky_lower",
    "Cholesky",
    [spd],
    np.linalg.cholesky(spd.astype(np.float64)).astype(np.float32),
    rtol=1e-4,
    atol=1e-5,
    lower=True,
)
add_case("Dropout_inference", "Dropout", [x], [x, np.ones(x.shape, bool)], training_mode=False)
prob, target = f32(3, 4, low=0.05, high=0.95), f32(3, 4, low=0, high=1)
bce = -(target * np.log(prob.astype(np.float64)) + (1 - target) * np.log1p(-prob.astype(np.float64)))
add_case("BCELoss_mean", "BCELoss", [prob, target], np.float32(bce.mean()), rtol=1e-5)
bw = f32(4, low=0, high=1)
add_case(
    "BCELoss_none_weighted", "BCELoss", [prob, target, bw], (bce * bw).astype(np.float32), rtol=1e-5, reduction="none"
)


ds = f32(4, 7)
add_case(
    "RealDynamicSlice",
    "RealDynamicSlice",
    [ds, Const(np.array([-3, 1], np.int64)), Const(np.array([100, 7], np.int64)), Const(np.array([2, 3], np.int64))],
    ds[-3:100:2, 1:7:3],
)
add_case(
    "RealDynamicSlice_axes",
    "RealDynamicSlice",
    [
        ds,
        Const(np.array([2], np.int64)),
        Const(np.array([-1], np.int64)),
        Const(np.array([1], np.int64)),
        Const(np.array([-1], np.int64)),
    ],
    ds[:, 2:-1],
)
add_case("SetDimensionSize", "SetDimensionSize", [ds, Const(np.array(5, np.int32))], ds[:, :5], dimension=1)
seq = f32(5, 3, 2)
seq_lens = np.array([5, 2, 0], np.int64)
seq_expected = seq.copy()
for b_i, n_i in enumerate(seq_lens):
    seq_expected[:n_i, b_i] = seq[:n_i, b_i][::-1]
add_case("ReverseSequence", "ReverseSequence", [seq, seq_lens], seq_expected, batch_axis=1, time_axis=0)
add_case(
    "ReverseSequence_batch0",
    "ReverseSequence",
    [seq.transpose(1, 0, 2), seq_lens],
    seq_expected.transpose(1, 0, 2),
    batch_axis=0,
    time_axis=1,
)


def _uniform_check(outputs):
    (u,) = outputs
    assert u.shape == (64, 64) and u.dtype == np.float32
    assert u.min() >= 2 and u.max() < 3 and abs(u.mean() - 2.5) < 0.02 and abs(u.std() - 1 / np.sqrt(12)) < 0.02


def _normal_check(outputs):
    (n,) = outputs
    assert n.shape == (64, 64) and abs(n.mean() - 2) < 0.2 and abs(n.std() - 3) < 0.2


for op, check in (("RngUniform", _uniform_check), ("RngNormal", _normal_check)):
    g_rng, f_rng = Graph(op), {}
    a_v, b_v, s_v = _add_operands(g_rng, [np.float32(2), np.float32(3), Const(np.array([64, 64], np.int64))], f_rng)
    out_rng = hlo_node(g_rng, op, a_v, b_v, s_v, seed=7)
    out_rng.type = TensorType("float32", (64, 64))
    g_rng.outputs = [out_rng]
    add_model_case(op, Model(g_rng, "hlo", dict(OPSETS)), f_rng, None, check=check)


def _ort_resize(x_in, scales, sizes, **attrs):
    """onnxruntime's Resize: an oracle independent of opconv's resize kernel."""
    import onnx
    from onnx import TensorProto, helper

    from tests.runtimes import run_ort

    inits = [helper.make_tensor("roi", TensorProto.FLOAT, [0], [])]
    inputs = ["x", "roi"]
    if scales is not None:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
        inputs.append("scales")
    else:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
        inputs += ["", "sizes"]
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "resize",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_in.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * x_in.ndim)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(model)
    return run_ort(model, {"x": x_in})[0]


rz = f32(1, 2, 3, 4)
for rid, scales_, sizes_, hlo_attrs, onnx_attrs in [
    (
        "nearest_asymmetric_floor",
        None,
        [1, 2, 6, 7],
        dict(mode="NEAREST", coordinate_transformation_mode="ASYMMETRIC", nearest_mode="FLOOR"),
        dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    ),
    (
        "linear_half_pixel_scales",
        [1.0, 1.0, 2.0, 0.5],
        None,
        dict(mode="LINEAR"),
        dict(mode="linear", coordinate_transformation_mode="half_pixel"),
    ),
    (
        "cubic_align_corners",
        None,
        [1, 2, 5, 3],
        dict(mode="CUBIC", coordinate_transformation_mode="ALIGN_CORNERS", cubic_coeff_a=-0.5),
        dict(mode="cubic", coordinate_transformation_mode="align_corners", cubic_coeff_a=-0.5),
    ),
    (
        "cubic_exclude_outside",
        [1.0, 1.0, 1.5, 1.75],
        None,
        dict(mode="CUBIC", exclude_outside=True),
        dict(mode="cubic", exclude_outside=1),
    ),
]:
    resize_args = [
        rz,
        None,
        None if scales_ is None else Const(np.array(scales_, np.float32)),
        None if sizes_ is None else Const(np.array(sizes_, np.int64)),
    ]
    add_case(
        f"Resize_{rid}",
        "Resize",
        resize_args,
        _ort_resize(rz, scales_, sizes_, **onnx_attrs),
        rtol=1e-5,
        atol=1e-5,
        **hlo_attrs,
    )


def _ort_grid_sample(x_in, grid, **attrs):
    from onnx import TensorProto, helper

    from tests.runtimes import run_ort

    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "grid_sample",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, x_in.shape),
            helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * x_in.ndim)],
    )
    return run_ort(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), {"x": x_in, "grid": grid})[0]


gs_x, gs_grid = f32(2, 3, 4, 5), f32(2, 3, 6, 2, low=-1.3, high=1.3)
for mode, padding_mode, align in [
    ("LINEAR", "PAD_VALUE", False),
    ("LINEAR", "PAD_EDGE", True),
    ("NEAREST", "PAD_VALUE", True),
    ("NEAREST", "PAD_EDGE", False),
    ("LINEAR", "PAD_REFLECT", False),
    ("NEAREST", "PAD_REFLECT", True),
]:
    add_case(
        f"GridSample_{mode}_{padding_mode}_{align}",
        "GridSample",
        [gs_x, gs_grid],
        _ort_grid_sample(
            gs_x,
            gs_grid,
            mode={"LINEAR": "linear", "NEAREST": "nearest"}[mode],
            padding_mode={"PAD_VALUE": "zeros", "PAD_EDGE": "border", "PAD_REFLECT": "reflection"}[padding_mode],
            align_corners=int(align),
        ),
        rtol=1e-5,
        atol=1e-5,
        mode=mode,
        padding_mode=padding_mode,
        align_corners=align,
    )


gs_v, gs_vgrid = f32(1, 2, 3, 4, 2), f32(1, 2, 3, 2, 3, low=-1.1, high=1.1)
add_case(
    "GridSample_volumetric_linear",
    "GridSample",
    [gs_v, gs_vgrid],
    _ort_grid_sample(gs_v, gs_vgrid, mode="linear", padding_mode="zeros", align_corners=0),
    rtol=1e-5,
    atol=1e-5,
    mode="LINEAR",
    padding_mode="PAD_VALUE",
    align_corners=False,
)


def _ort_roi_align(x_in, rois, batch, **attrs):
    from onnx import TensorProto, helper

    from tests.runtimes import run_ort

    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "roi_align",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, x_in.shape),
            helper.make_tensor_value_info("rois", TensorProto.FLOAT, rois.shape),
            helper.make_tensor_value_info("b", TensorProto.INT64, batch.shape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    return run_ort(model, {"x": x_in, "rois": rois, "b": batch})[0]


ra_x = f32(2, 3, 6, 7)
ra_rois = np.array([[0.5, 1.0, 4.0, 5.5], [-1.5, 2.0, 3.0, 9.3], [2.0, 2.0, 2.2, 2.3]], np.float32)
ra_batch = np.array([1, 0, 1], np.int64)
for mode, transform in [
    ("ROIALIGN_AVG", "ROIALIGN_HALF_PIXEL"),
    ("ROIALIGN_AVG", "ROIALIGN_OUTPUT_HALF_PIXEL"),
    ("ROIALIGN_MAX", "ROIALIGN_HALF_PIXEL"),
]:
    add_case(
        f"RoiAlign_{mode}_{transform}",
        "RoiAlign",
        [ra_x, ra_rois, ra_batch],
        _ort_roi_align(
            ra_x,
            ra_rois,
            ra_batch,
            mode=mode.split("_")[1].lower(),
            coordinate_transformation_mode="half_pixel" if transform == "ROIALIGN_HALF_PIXEL" else "output_half_pixel",
            output_height=2,
            output_width=3,
            sampling_ratio=2,
            spatial_scale=0.8,
        ),
        rtol=1e-5,
        atol=1e-5,
        mode=mode,
        coordinate_transformation_mode=transform,
        output_height=2,
        output_width=3,
        sampling_ratio=2,
        spatial_scale=0.8,
    )


def _custom_call_model():
    return _single_node_model(
        "CustomCall",
        [f32(3)],
        [Typ("float32", (3,)), Typ("int32", ())],
        call_target_name="vendor.fused",
        backend_config='{"mode": "fast"}',
    )


# -- half precision -------------------------------------------------------------------------------

import ml_dtypes  # noqa: E402  (shipped with onnx)

h = f32(2, 3, 8).astype(np.float16)
hs, hb = f32(8).astype(np.float16), f32(8).astype(np.float16)
add_case("Add_f16", "Add", [h, h[::-1].copy()], h + h[::-1])
hm = h.astype(np.float64).mean(-1, keepdims=True)
hv = h.astype(np.float64).var(-1, keepdims=True)
add_case(
    "LayerNorm_f16",
    "LayerNorm",
    [h, hs, hb],
    [
        ((h - hm) / np.sqrt(hv + 1e-5) * hs + hb).astype(np.float16),
        Typ("float16", (2, 3, 1)),
        Typ("float16", (2, 3, 1)),
    ],
    rtol=1e-2,
    atol=1e-2,
    axis=-1,
)
he = np.exp(h.astype(np.float64) - h.max(-1, keepdims=True))
add_case(
    "Softmax_f16",
    "Softmax",
    [h],
    (he / he.sum(-1, keepdims=True)).astype(np.float16),
    rtol=1e-2,
    atol=1e-3,
    accurate=True,
)
hb16 = f32(3, 4).astype(ml_dtypes.bfloat16)
add_case(
    "Sub_bf16_constant",
    "Sub",
    [hb16, Const(np.full((3, 4), 0.5, ml_dtypes.bfloat16))],
    (hb16.astype(np.float32) - 0.5).astype(ml_dtypes.bfloat16),
    rtol=1e-2,
    atol=1e-2,
)
add_case("Constant_f16_values", "Constant", [], h, value=h)


# -- tests ----------------------------------------------------------------------------------------

CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "duplicate case ids"


PARTS = 2  # modules compiled in parallel (iree-compile uses one core per module)


@pytest.fixture(scope="module")
def compiled():
    """Every case exported as ``@case_N`` into a few modules, compiled once; export errors kept per case."""
    functions, errors = [[] for _ in range(PARTS)], {}
    for i, case in enumerate(CASES):
        try:
            functions[i % PARTS].append(export_function(case.model, f"case_{i}"))
        except StableHloExportError as error:
            errors[case.id] = error
    texts = [module_text(part, f"part{k}") for k, part in enumerate(functions)]
    return iree_runtime.IreeModule(texts), errors


def _executor_outputs(case: Case):
    try:
        outputs = opconv.run(case.model, case.feeds)
    except ExecutionError as error:
        if "has no kernel" in str(error):
            return None
        raise
    return [outputs[v.name] for v in case.model.graph.outputs]


def _assert_close(got, want, case: Case, oracle: str, index: int):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{case.id} output {index}: shape {got.shape} vs {oracle} {want.shape}"
    assert got.dtype == want.dtype, f"{case.id} output {index}: dtype {got.dtype} vs {oracle} {want.dtype}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=f"{case.id} output {index} vs {oracle}")
    else:
        np.testing.assert_allclose(
            got, want, rtol=case.rtol, atol=case.atol, err_msg=f"{case.id} output {index} vs {oracle}"
        )


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(CASES)), ids=CASE_IDS)
def test_iree_matches_oracles(compiled, index):
    module, errors = compiled
    case = CASES[index]
    if case.id in errors:
        raise errors[case.id]
    feeds = [case.feeds[v.name] for v in case.model.graph.inputs]
    got = module.call(f"case_{index}", *feeds)
    if case.check is not None:
        case.check(got)  # random draws: IREE's own generator, checked by their statistics
        executed = _executor_outputs(case)
        if executed is not None:
            case.check(executed)
        return
    oracles = []
    if case.expected is not None:
        oracles.append(("numpy formula", case.expected))
    executed = _executor_outputs(case)
    if executed is not None:
        oracles.append(("opconv HLO executor", executed))
    assert oracles, f"{case.id}: neither a numpy formula nor an HLO executor kernel to compare with"
    for oracle, want in oracles:
        assert len(got) == len(want)
        for i, (g, e) in enumerate(zip(got, want)):
            _assert_close(g, e, case, oracle, i)


def test_custom_call_is_valid_stablehlo():
    """IREE has no vendor targets to run it, so its MLIR parser and verifier are the check."""
    from iree.compiler import ir

    text = export(_custom_call_model())
    assert '"stablehlo.custom_call"(%arg0) {call_target_name = "vendor.fused"' in text
    assert 'backend_config = "{\\"mode\\": \\"fast\\"}"' in text
    with ir.Context() as context:
        module = ir.Module.parse(text, context)
        assert module.operation.verify()


def test_every_exported_op_is_exercised():
    from tests.test_hlo_stablehlo_extra_ops import EXTRA_OPS  # exercised in IREE there

    covered = set().union(*(c.ops for c in CASES)) | {"CustomCall"} | EXTRA_OPS  # CustomCall: see below
    assert sorted(set(exportable_ops()) - covered) == []


def _single_node_model(op, args, outs, **attrs):
    graph, feeds = Graph("refused"), {}
    values = _add_operands(graph, args, feeds)
    produced = hlo_node(graph, op, *values, _outputs=len(outs), **attrs)
    produced = produced if isinstance(produced, list) else [produced]
    for v, out in zip(produced, outs):
        v.type = _type_of(out)
    graph.outputs = produced
    return Model(graph, "hlo", dict(OPSETS))


REFUSED = [
    ("NonZero", [f32(3)], [Typ("int64", (2, 1))], {}, "no static StableHLO form"),
    ("NMS", [f32(1, 3, 4), f32(1, 1, 3)], [Typ("int64", (1, 3))], {}, "no static StableHLO form"),
    ("PartialReduce", [f32(8), np.float32(0)], [Typ("float32", (2,))], {"size": 2}, "comparator region"),
    ("Dropout", [f32(3)], [Typ("float32", (3,))], {"ratio": 0.5}, "random"),
    (
        "Resize",
        [f32(1, 1, 2, 2), f32(8), None, Const(np.array([1, 1, 4, 4], np.int64))],
        [Typ("float32", (1, 1, 4, 4))],
        {"coordinate_transformation_mode": "TF_CROP_AND_RESIZE"},
        "roi (input 1)",
    ),
    (
        "ReduceWindow",
        [f32(4), f32(4), np.float32(0), np.float32(0)],
        [Typ("float32", (3,)), Typ("float32", (3,))],
        {"computation": "ARGMAX", "window_dimensions": [2]},
        "ReduceWindow of 2 inputs",
    ),
    ("Reduce", [f32(3), np.float32(0)], [Typ("float32", ())], {"dimensions": [0], "computation": "ARGMAX"}, "ARGMAX"),
    ("Rsqrt", [i32(3)], [Typ("int32", (3,))], {}, "floating"),
    (
        "GridSample",
        [f32(1, 1, 2, 2), f32(1, 2, 2, 2)],
        [Typ("float32", (1, 1, 2, 2))],
        {"padding_mode": "PAD_SYMMETRIC"},
        "PAD_SYMMETRIC",
    ),
    (
        "RoiAlign",
        [f32(1, 1, 4, 4), f32(1, 4), np.array([0], np.int64)],
        [Typ("float32", (1, 1, 1, 1))],
        {},
        "sampling_ratio 0",
    ),
    (
        "CTCLoss",
        [f32(4, 1, 3), np.array([[1, 2]], np.int64), np.array([4], np.int64), np.array([2], np.int64)],
        [Typ("float32", (1,)), Typ("float32", (1, 4, 7))],
        {},
        "(N, S) = (1, 3)",
    ),
]


@pytest.mark.parametrize("op,args,outs,attrs,words", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_ops_name_node_and_op(op, args, outs, attrs, words):
    model = _single_node_model(op, args, outs, **attrs)
    with pytest.raises(StableHloExportError) as info:
        export(model)
    message = str(info.value)
    assert op in message and words in message
    assert model.graph.nodes[0].name in message


def test_dynamic_shape_is_refused():
    graph = Graph("dynamic")
    a = graph.add_input("a", TensorType("float32", ("batch", 3)))
    out = hlo_node(graph, "Abs", a)
    out.type = TensorType("float32", ("batch", 3))
    graph.outputs = [out]
    with pytest.raises(StableHloExportError, match="static tensor type"):
        export(Model(graph, "hlo", dict(OPSETS)))


def test_module_text_shape():
    case = next(c for c in CASES if c.id == "GeGlu")
    text = export(case.model)
    assert text.startswith("module {") and 'func.func @main(%arg0: tensor<2x3x8xf32> {jax.arg_info = "x0"})' in text
    assert '"chlo.erf"' in text and '"stablehlo.slice"' in text
    assert "GeGlu" not in text.split("func.func", 1)[1].split("{\n", 1)[1]  # decomposed, no vendor op left


# -- weights as arguments -------------------------------------------------------------------------


def _dot_bias_model(weight: np.ndarray, bias: np.ndarray) -> Model:
    """x[2,64] . weight[64,32] + bias[32], the weight (8 KiB) and bias (128 B) as initializers."""
    graph = Graph("dense")
    x = graph.add_input("x", TensorType("float32", (2, 64)))
    w, b = graph.const(weight, "weight"), graph.const(bias, "bias")
    y = hlo_node(graph, "DotGeneral", x, w, lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
    y.type = TensorType("float32", (2, 32))
    wide = hlo_node(graph, "BroadcastInDim", b, broadcast_dimensions=[1])
    wide.type = TensorType("float32", (2, 32))
    out = hlo_node(graph, "Add", y, wide)
    out.type = TensorType("float32", (2, 32))
    graph.outputs = [out]
    return Model(graph, "hlo", dict(OPSETS))


def test_weights_as_arguments_follow_the_inputs_and_compute_the_same():
    rng = np.random.default_rng(7)
    x, weight, bias = (rng.standard_normal(s).astype(np.float32) for s in ((2, 64), (64, 32), (32,)))
    model = _dot_bias_model(weight, bias)
    inline = export(model)
    assert "%w0" not in inline  # the default
    assert 'func.func @main(%arg0: tensor<2x64xf32> {jax.arg_info = "x"}) ->' in inline
    text = export(model, weights="arguments")
    assert (
        'func.func @main(%arg0: tensor<2x64xf32> {jax.arg_info = "x"}, '
        '%w0: tensor<64x32xf32> {jax.arg_info = "weight"}) ->'
    ) in text
    assert "tensor<64x32xf32>} : () -> tensor<64x32xf32>" not in text  # no literal of the weight
    assert "dense<" in text and "tensor<32xf32>" in text  # the 128-byte bias stays inline
    assert [name for name, _ in weight_arguments(model)] == ["weight"]
    everything = weight_arguments(model, min_weight_bytes=0)
    assert [name for name, _ in everything] == ["weight", "bias"]
    module = iree_runtime.IreeModule(
        [
            text.replace("@main", "@by_argument"),
            export(model, function_name="all_arguments", weights="arguments", min_weight_bytes=0),
        ]
    )
    expected = x.astype(np.float64) @ weight + bias
    np.testing.assert_allclose(module.call("by_argument", x, weight)[0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(module.call("all_arguments", x, weight, bias)[0], expected, rtol=1e-5, atol=1e-5)
    # The weights really are read from the arguments.
    np.testing.assert_allclose(
        module.call("by_argument", x, 2 * weight)[0], 2 * (expected - bias) + bias, rtol=1e-5, atol=1e-5
    )


def test_weights_mode_is_checked():
    with pytest.raises(StableHloExportError, match="weights must be one of inline, arguments"):
        export(_dot_bias_model(np.zeros((64, 32), np.float32), np.zeros(32, np.float32)), weights="constants")


def test_cli_writes_weights_as_arguments_next_to_the_mlir(tmp_path, fixtures_dir):
    import onnx
    from click.testing import CliRunner

    from opconv.cli import cli
    from tests.runtimes import run_ort

    source = os.path.join(fixtures_dir, "cnn.onnx")
    out = tmp_path / "cnn.mlir"
    result = CliRunner().invoke(
        cli, ["onnx-to-hlo", source, "-o", str(out), "--weights-as-arguments", "--input-shape", "image=1,3,32,32"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(tmp_path)) == ["cnn.mlir", "cnn.npz"]
    with np.load(tmp_path / "cnn.npz") as archive:
        weights = [archive[name] for name in archive.files]
    text = out.read_text()
    assert weights and f"%w{len(weights) - 1}: " in text and f"%w{len(weights)}: " not in text
    image = np.random.default_rng(8).standard_normal((1, 3, 32, 32)).astype(np.float32)
    got = iree_runtime.IreeModule(text).call("main", image, *weights)
    expected = run_ort(onnx.load(source), {"image": image})
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_cli_weights_as_arguments_needs_stablehlo(tmp_path, fixtures_dir):
    from click.testing import CliRunner

    from opconv.cli import cli

    result = CliRunner().invoke(
        cli,
        [
            "onnx-to-hlo",
            os.path.join(fixtures_dir, "cnn.onnx"),
            "-o",
            str(tmp_path / "cnn.hlo"),
            "--format",
            "text",
            "--weights-as-arguments",
        ],
    )
    assert result.exit_code == 2 and "--weights-as-arguments needs --format stablehlo" in result.output
    assert os.listdir(tmp_path) == []

"""Adapters of element-wise operators: legacy broadcasting, Clip's bounds, activations added late.

* Binary ops before opset 7 broadcast only ``B`` to ``A`` and only with ``broadcast=1``
  (``axis`` says where B's dims start); from 7 both sides broadcast numpy-style.
* Max/Min/Sum/Mean before opset 8 need equal shapes.
* Clip-11 takes ``min``/``max`` as inputs instead of attributes.
* Celu-12, HardSwish-14, Mish-18, Gelu-20, LessOrEqual/GreaterOrEqual-12 decompose into older ops, and so do
  Max/Min-12 of integers (Where chains).
"""

from __future__ import annotations

import numpy as np

from ...ir import Attr
from ...types import TensorType
from ..rewrite import Refuse
from .registry import downgrade, needs_types, semantic_change, upgrade

_LEGACY_BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")
_SWAPPABLE = {
    "Add": "Add",
    "Mul": "Mul",
    "And": "And",
    "Or": "Or",
    "Xor": "Xor",
    "Equal": "Equal",
    "Greater": "Less",
    "Less": "Greater",
}

semantic_change(("Max", "Min", "Sum", "Mean"), 8, "inputs broadcast numpy-style")
semantic_change("PRelu", 7, "slope broadcasts numpy-style")
needs_types(_LEGACY_BINARY + ("Clip", "PRelu"))


@upgrade(_LEGACY_BINARY, 7)
def binary_explicit_broadcast(ctx, node):
    """``broadcast=1, axis=k``: give B trailing 1-dims so numpy-style broadcasting aligns it at ``k``."""
    broadcast = ctx.pop_attr(node, "broadcast", 0)
    axis = ctx.pop_attr(node, "axis")
    if not broadcast or axis is None:
        return  # equal shapes, or B aligned with A's trailing dims: the same under numpy rules
    b = node.inputs[1]
    rank_a = ctx.rank(node.inputs[0], "input A")
    rank_b = ctx.rank(b, "input B")
    axis = axis + rank_a if axis < 0 else axis
    trailing = rank_a - axis - rank_b
    if trailing > 0:
        node.set_input(1, ctx.op("Unsqueeze", b, axes=list(range(rank_b, rank_b + trailing)), _version=6))


@downgrade(_LEGACY_BINARY, 7)
def binary_legacy_broadcast(ctx, node):
    a, b = node.inputs[0], node.inputs[1]
    sa, sb = ctx.shape(a), ctx.shape(b)
    if sa is None or sb is None:
        raise Refuse("the operand shapes are unknown; before opset 7 they decide the broadcast attributes")
    if sa == sb:
        return
    if _broadcasts_to(sb, sa):
        ctx.set_attr(node, "broadcast", 1)
        return
    if _broadcasts_to(sa, sb) and node.op in _SWAPPABLE:
        node.op = _SWAPPABLE[node.op]
        ctx.set_inputs(node, [b, a])
        ctx.set_attr(node, "broadcast", 1)
        return
    raise Refuse(f"shapes {list(sa)} and {list(sb)} broadcast both ways; before opset 7 only B broadcasts to A")


def _broadcasts_to(small, big) -> bool:
    if len(small) > len(big) or any(not isinstance(d, int) for d in tuple(small) + tuple(big)):
        return False
    try:
        return tuple(np.broadcast_shapes(tuple(small), tuple(big))) == tuple(big)
    except ValueError:
        return False


@downgrade(("Max", "Min", "Sum", "Mean"), 8)
def variadic_equal_shapes(ctx, node):
    shapes = {ctx.shape(v) for v in node.inputs if v is not None}
    if None in shapes or len(shapes) != 1:
        raise Refuse(
            f"input shapes {sorted(map(str, shapes))} differ or are unknown; before opset 8 they must be equal"
        )


def _per_channel(slope, x) -> bool:
    """PRelu-1/6 applied a 1-D slope of X.shape[1] values per channel (dim 1)."""
    return len(slope) == 1 and slope[0] != 1 and len(x) >= 2 and slope[0] == x[1]


@downgrade("PRelu", 7)
def prelu_legacy_slope(ctx, node):
    x, slope = ctx.shape(node.inputs[0]), ctx.shape(node.inputs[1])
    if x is None or slope is None:
        raise Refuse("the shapes of X and slope are unknown; PRelu before 7 reads a 1-D slope per channel")
    if len(slope) == len(x) - 1 and len(x) > 2 and slope[0] == x[1] and all(d == 1 for d in slope[1:]):
        flat = ctx.op("Reshape", node.inputs[1], ctx.const(np.array([slope[0]], np.int64), "shape"))
        node.set_input(1, flat)  # (C, 1, 1) per channel is PRelu-6's 1-D slope
        return
    if _per_channel(slope, x) and len(x) > 2 or not _broadcasts_to(slope, x):
        raise Refuse(f"slope {list(slope)} on X {list(x)} has no PRelu-6 equivalent")


@upgrade("Clip", 11)
def clip_bounds_to_inputs(ctx, node):
    dtype = ctx.dtype(node.inputs[0]) or "float32"
    lo, hi = ctx.pop_attr(node, "min"), ctx.pop_attr(node, "max")
    bound = [
        None if v is None else ctx.const(np.array(v, dtype=_np(dtype)), name) for v, name in ((lo, "min"), (hi, "max"))
    ]
    ctx.set_inputs(node, [node.inputs[0], *bound])


@downgrade("Clip", 11)
def clip_bounds_to_attributes(ctx, node):
    x = node.inputs[0]
    for i, name in ((1, "min"), (2, "max")):
        v = node.inputs[i] if len(node.inputs) > i else None
        if v is not None:
            data = ctx.static(v, f"Clip's {name}")
            node.attrs[name] = Attr(name, "float", float(np.asarray(data).reshape(())))
    ctx.set_inputs(node, [x])


def _np(dtype: str):
    from ...types import element_type

    return element_type(dtype).numpy


def _scalar(ctx, value: float, like) -> object:
    """A scalar constant of ``like``'s element type (float32 when unknown)."""
    dtype = ctx.dtype(like) or "float32"
    return ctx.const(np.array(value, dtype=_np(dtype)), "scalar")


def _like(out, like):
    out.type = like.type  # the adapters below read like's type (ctx.shape) before building
    return out


@downgrade("Celu", 12)
def celu_as_elu(ctx, node):
    """celu(x) = alpha * elu(x / alpha) with elu's alpha 1."""
    x = node.inputs[0]
    ctx.shape(x)  # completes x's type from inference
    alpha = float(node.attr("alpha", 1.0))
    if alpha == 1.0:
        y = _like(ctx.op("Elu", x, alpha=1.0), x)
    else:
        scaled = _like(ctx.op("Div", x, _scalar(ctx, alpha, x)), x)
        y = _like(ctx.op("Mul", _like(ctx.op("Elu", scaled, alpha=1.0), x), _scalar(ctx, alpha, x)), x)
    ctx.replace(node, [y])


@downgrade("HardSwish", 14)
def hardswish_as_hardsigmoid(ctx, node):
    x = node.inputs[0]
    ctx.shape(x)  # completes x's type from inference
    gate = _like(ctx.op("HardSigmoid", x, alpha=1.0 / 6.0, beta=0.5), x)
    ctx.replace(node, [_like(ctx.op("Mul", x, gate), x)])


@downgrade("Mish", 18)
def mish_as_softplus_tanh(ctx, node):
    x = node.inputs[0]
    ctx.shape(x)  # completes x's type from inference
    t = _like(ctx.op("Tanh", _like(ctx.op("Softplus", x), x)), x)
    ctx.replace(node, [_like(ctx.op("Mul", x, t), x)])


@downgrade("Gelu", 20)
def gelu_as_erf_or_tanh(ctx, node):
    from ..decompose import replace_in_step
    from ..decompose.activation import gelu_20

    replace_in_step(ctx, node, gelu_20)  # the decomposition's formula: one copy of it


@downgrade(("LessOrEqual", "GreaterOrEqual"), 12)
def compare_or_equal(ctx, node):
    """a <= b as (a < b) or (a == b): exact, NaN included."""
    a, b = node.inputs[0], node.inputs[1]
    strict = "Less" if node.op == "LessOrEqual" else "Greater"
    ctx.shape(node.outputs[0])
    out_type = node.outputs[0].type
    lt = ctx.op(strict, a, b)
    eq = ctx.op("Equal", a, b)
    for v in (lt, eq):
        shape = ctx.shape(node.outputs[0])
        v.type = TensorType("bool", shape) if out_type is not None else None
    y = ctx.op("Or", lt, eq)
    y.type = out_type
    ctx.replace(node, [y])


@downgrade(("Max", "Min"), 12)
def integer_max_min_as_where(ctx, node):
    """Max/Min of integers (from opset 12; Max-8 takes floats only) as Where(Greater/Less) chains: exact, and
    Greater/Less/Where take integers from opset 9.  Exporters write Max/Min of int64 shapes and positions."""
    dtype = ctx.dtype(node.inputs[0])
    inputs = [v for v in node.inputs if v is not None]
    if dtype is None or dtype in ("float16", "float32", "float64") or len(inputs) < 2:
        return  # the older Max/Min takes it as it is (or the driver names the type it does not take)
    ctx.shape(node.outputs[0])
    out_type = node.outputs[0].type
    compare = "Greater" if node.op == "Max" else "Less"
    best = inputs[0]
    for v in inputs[1:]:
        best = ctx.op("Where", ctx.op(compare, best, v), best, v)
    best.type = out_type
    ctx.replace(node, [best])


@downgrade(("QuantizeLinear", "DequantizeLinear"), 13)
def quantize_per_tensor(ctx, node):
    scale = ctx.shape(node.inputs[1])
    if scale is None or int(np.prod(scale)) != 1:
        raise Refuse("per-axis scales need opset 13 or later (opset 10 quantizes per tensor)")
    ctx.pop_attr(node, "axis")


@upgrade(("Max", "Min", "Sum", "Mean"), 8)
def variadic_broadcast_superset(ctx, node):
    """Equal shapes (all opset 1..7 allowed) broadcast to themselves: nothing to change."""


@upgrade("PRelu", 7)
def prelu_numpy_slope(ctx, node):
    x, slope = ctx.shape(node.inputs[0]), ctx.shape(node.inputs[1])
    if x is None or slope is None:
        raise Refuse("the shapes of X and slope are unknown; PRelu-7 broadcasts the slope numpy-style")
    if _per_channel(slope, x):
        if len(x) > 2:
            node.set_input(1, ctx.op("Unsqueeze", node.inputs[1], axes=list(range(1, len(x) - 1)), _version=6))
        return
    if _broadcasts_to(slope, x):
        return
    raise Refuse(f"slope {list(slope)} does not broadcast to X {list(x)}")

"""Fusions: multi-node ONNX patterns that become one of the dialect's fused ops.

Each rule's pattern is the subgraph exporters write (PyTorch's Gelu is
``x * 0.5 * (1 + erf(x / sqrt 2))`` spelled with Div/Erf/Add/Mul nodes, a
hand-written LayerNorm is ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div ...); the
check verifies the constants (0.5, sqrt 2, epsilon, axes) so that only the
exact formula fuses.  Variants (operand order, Pow or Mul for the square)
are generated in loops.  Rules are anchored at the last node of the
pattern, which the engine visits before the nodes it consumes, so a fusion
always wins over the one-to-one rules of its parts; the lowering registry tries them, in this
module's order, before the single-node translators of their root op.
"""

from __future__ import annotations

import math

import numpy as np

from ...types import TensorType
from ..lowering import add_rules
from ._common import (
    Refuse,
    Rule,
    binary,
    broadcast,
    dtype_of,
    full,
    hlo,
    is_float,
    normalize_axis,
    reshape,
    shape_of,
    static_type,
)
from .nn import conv_attrs, dot

FUSION_PREFIX = "fuse:"


def _close(data, value: float, rtol: float = 1e-3) -> bool:
    if data is None or np.asarray(data).size != 1:
        return False
    return bool(np.isclose(float(np.asarray(data).reshape(())), value, rtol=rtol, atol=0))


def _channel_bias(m, name: str, channels: int, rank: int):
    """The bias as a [C] vector when it is [C, 1, ...] or [1, C, 1, ...] (per output channel), else None."""
    bias = m[name]
    try:
        bs = shape_of(bias)
    except Refuse:
        return None
    if len(bs) > rank:
        return None
    padded = (1,) * (rank - len(bs)) + tuple(bs)
    if padded[0] != 1 or padded[1] != channels or any(d != 1 for d in padded[2:]):
        return None
    return bias


# ---------------------------------------------------------------------------
# Conv + Add -> ConvBias
# ---------------------------------------------------------------------------


def _conv_add_check(m):
    conv = m.node("conv")
    y = conv.outputs[0]
    if y.shape is None:
        return "the Conv output shape is unknown"
    if _channel_bias(m, "bias", y.shape[1], len(y.shape)) is None:
        return f"the added {m['bias'].name!r} is not a per-channel bias"
    return None


def _conv_add(b, m):
    conv = m.node("conv")
    x, w = conv.inputs[:2]
    c = shape_of(conv.outputs[0])[1]
    bias = reshape(b, m["bias"], (c,))
    if dtype_of(bias) != dtype_of(x):
        raise Refuse("bias element type differs from the convolution's")
    if len(conv.inputs) > 2 and conv.inputs[2] is not None:
        bias = binary(b, "Add", bias, conv.inputs[2])
    return hlo(
        b, "ConvBias", x, w, bias, type=static_type(m.root.outputs[0]), **conv_attrs(conv, shape_of(x), shape_of(w))
    )


# ---------------------------------------------------------------------------
# Conv + BatchNormalization (inference, constant weights) -> ConvBias with folded weights
# ---------------------------------------------------------------------------


def _conv_bn_check(m):
    bn = m.node("bn")
    if (
        bn.attr("training_mode", 0)
        or not bn.attr("spatial", 1)
        or ((bn.version or 15) < 7 and not bn.attr("is_test", 0))
    ):
        return "the BatchNormalization is not in inference mode"
    if any(v is not None and (v.uses or any(v is o for o in m.graph.outputs)) for v in bn.outputs[1:]):
        return "the running statistics are read"
    names = ["w", "scale", "bias", "mean", "var"] + (["cb"] if "cb" in m.values else [])
    if any(m.constant(n) is None for n in names):
        return "the weights and statistics are not all constants"
    if m["x"].dtype not in ("float32", "float64"):
        return "not float32/float64"
    return None


def _conv_bn(b, m):
    conv, bn = m.node("conv"), m.node("bn")
    x, w = m["x"], m["w"]
    dt = np.dtype(np.float32 if x.dtype == "float32" else np.float64)
    scale, shift, mean, var = (np.asarray(m.constant(n), np.float64) for n in ("scale", "bias", "mean", "var"))
    k = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    weights = np.asarray(m.constant("w"), np.float64)
    folded_w = weights * k.reshape((-1,) + (1,) * (weights.ndim - 1))
    conv_bias = np.asarray(m.constant("cb"), np.float64) if "cb" in m.values else 0.0
    folded_b = (conv_bias - mean) * k + shift
    wv = b.const(folded_w.astype(dt), f"{w.name}/bn_folded")
    bv = b.const(folded_b.astype(dt), f"{bn.name or 'bn'}/bias_folded")
    y = hlo(b, "ConvBias", x, wv, bv, type=static_type(bn.outputs[0]), **conv_attrs(conv, shape_of(x), shape_of(w)))
    return [y] + [None] * (m.n_outputs - 1)


# ---------------------------------------------------------------------------
# MatMul + Add -> DotGeneralBias
# ---------------------------------------------------------------------------


def _bias_vector_check(m):
    mm = m.node("mm")
    w, y = mm.inputs[1], mm.outputs[0]
    if w.shape is None or len(w.shape) != 2 or y.shape is None or len(y.shape) < 1:
        return "the MatMul weight is not 2-D"
    bias = m["bias"]
    if bias.shape is None or len(bias.shape) > len(y.shape):
        return "the bias shape is unknown"
    if any(d != 1 for d in bias.shape[:-1]) or (bias.shape and bias.shape[-1] != y.shape[-1]) or not bias.shape:
        return f"{bias.name!r} is not a bias on the last dim"
    if m.root.outputs[0].shape != y.shape:
        return "the Add broadcasts beyond the MatMul result"
    return None


def _matmul_add(b, m):
    mm = m.node("mm")
    a, w = mm.inputs[:2]
    bias = m["bias"]
    n = shape_of(bias)[-1]
    return dot(b, a, w, bias=reshape(b, bias, (n,)))


def _gemm_add_check(m):
    gemm = m.node("mm")
    if len([v for v in gemm.inputs if v is not None]) != 2:
        return "the Gemm already has C"
    if gemm.attr("alpha", 1.0) != 1.0:
        return "alpha != 1"
    return _bias_vector_check_gemm(m)


def _bias_vector_check_gemm(m):
    y = m.node("mm").outputs[0]
    bias = m["bias"]
    if y.shape is None or bias.shape is None or not bias.shape or len(bias.shape) > 2:
        return "shapes unknown"
    if any(d != 1 for d in bias.shape[:-1]) or bias.shape[-1] != y.shape[-1]:
        return f"{bias.name!r} is not a bias on the last dim"
    return None


def _gemm_add(b, m):
    gemm = m.node("mm")
    a, w = gemm.inputs[:2]
    ta, tb = int(gemm.attr("transA", 0)), int(gemm.attr("transB", 0))
    y = shape_of(gemm.outputs[0])
    bias = reshape(b, m["bias"], (y[-1],))
    return hlo(
        b,
        "DotGeneralBias",
        a,
        w,
        bias,
        type=TensorType(dtype_of(a), y),
        lhs_contracting_dimensions=[0 if ta else 1],
        rhs_contracting_dimensions=[1 if tb else 0],
        lhs_batching_dimensions=[],
        rhs_batching_dimensions=[],
    )


# ---------------------------------------------------------------------------
# LayerNorm from ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div (+ Mul scale, + Add bias)
# ---------------------------------------------------------------------------


def _ln_pattern(axes_input: bool, square: str, affine: str):
    def mean(op, v, name, axes):
        return op.ReduceMean(v, axes, _name=name) if axes_input else op.ReduceMean(v, _name=name)

    def body(op, x, a1, a2, two, eps, scale, bias):
        d = op.Sub(x, mean(op, x, "mean", a1), _name="sub")
        sq = op.Pow(d, two, _name="sq") if square == "pow" else op.Mul(d, d, _name="sq")
        std = op.Sqrt(op.Add(mean(op, sq, "var", a2), eps, _commute=True, _name="add_eps"), _name="sqrt")
        y = op.Div(d, std, _name="div")
        if affine in ("scale", "both"):
            y = op.Mul(y, scale, _commute=True, _name="mul_scale")
        if affine == "both":
            y = op.Add(y, bias, _commute=True, _name="add_bias")
        return y

    params = ["x"] + (["a1", "a2"] if axes_input else []) + (["two"] if square == "pow" else []) + ["eps"]
    params += {"none": [], "scale": ["scale"], "both": ["scale", "bias"]}[affine]

    def fn(op, *captured):
        named = dict(zip(params, captured))
        return body(
            op,
            named["x"],
            named.get("a1"),
            named.get("a2"),
            named.get("two"),
            named["eps"],
            named.get("scale"),
            named.get("bias"),
        )

    fn.capture_names = params  # the engine reads a generated pattern's captures here
    fn.__name__ = f"layer_norm_{'axes_in' if axes_input else 'axes_attr'}_{square}_{affine}"
    return fn


def _ln_axes(m, node_name: str, capture: str | None) -> list[int] | None:
    node = m.node(node_name)
    if capture is None:
        axes = node.attr("axes")
    else:
        data = m.constant(capture)
        axes = None if data is None else np.asarray(data).reshape(-1).tolist()
    if axes is None:
        return None
    return [int(a) for a in axes]


def _ln_check(m):
    x = m["x"]
    if x.shape is None or not all(isinstance(d, int) for d in x.shape) or x.dtype is None:
        return "the input shape is not static"
    if not is_float(x):
        return "not floating point"
    rank = len(x.shape)
    axes_input = "a1" in m.values
    axes = [
        _ln_axes(m, n, c) for n, c in (("mean", "a1" if axes_input else None), ("var", "a2" if axes_input else None))
    ]
    if any(a is None for a in axes):
        return "the reduction axes are not constant"
    a1, a2 = (sorted(normalize_axis(a, rank) for a in ax) for ax in axes)
    if a1 != a2 or a1 != list(range(a1[0], rank)):
        return f"the reduction axes {a1} are not the trailing axes"
    if any(int(m.node(n).attr("keepdims", 1)) != 1 for n in ("mean", "var")):
        return "keepdims=0"
    if "two" in m.values and not _close(m.constant("two"), 2.0, 0):
        return "the exponent is not 2"
    eps = m.constant("eps")
    if eps is None or np.asarray(eps).size != 1:
        return "epsilon is not a constant scalar"
    norm_shape = tuple(x.shape[a1[0] :])
    for name in ("scale", "bias"):
        if name in m.values:
            v = m[name]
            if (
                v.shape is None
                or len(v.shape) > len(norm_shape)
                or any(d not in (1, t) for d, t in zip(reversed(v.shape), reversed(norm_shape)))
            ):
                return f"{name} {v.name!r} does not broadcast over the normalised axes only"
    if m.root.outputs[0].shape != x.shape:
        return "the result is broadcast beyond the input"
    return None


def _layer_norm(b, m):
    x = m["x"]
    xs = shape_of(x)
    axis = min(normalize_axis(a, len(xs)) for a in _ln_axes(m, "mean", "a1" if "a1" in m.values else None))
    norm_shape = xs[axis:]
    dt = dtype_of(x)
    scale = broadcast(b, m["scale"], norm_shape) if "scale" in m.values else full(b, 1, dt, norm_shape)
    bias = broadcast(b, m["bias"], norm_shape) if "bias" in m.values else full(b, 0, dt, norm_shape)
    for v in (scale, bias):
        if dtype_of(v) != dt:
            raise Refuse("scale/bias element type differs from the input's")
    eps = float(np.asarray(m.constant("eps")).reshape(()))
    return hlo(b, "LayerNorm", x, scale, bias, type=TensorType(dt, xs), axis=axis, epsilon=eps)


# ---------------------------------------------------------------------------
# Gelu (erf and tanh forms)
# ---------------------------------------------------------------------------


def _gelu_erf_inner(op, x, s):
    """1 + erf(x / sqrt 2) (Div by sqrt 2) or with Mul by 1/sqrt 2 (the second variant)."""
    return op.Erf(op.Div(x, s, _name="scale"), _name="erf")


def _gelu_erf_inner_mul(op, x, s):
    return op.Erf(op.Mul(x, s, _commute=True, _name="scale"), _name="erf")


def _gelu_tanh_inner(op, x, s, c, three):
    cube = op.Pow(x, three, _name="cube")
    inner = op.Add(x, op.Mul(cube, c, _commute=True, _name="mul_c"), _commute=True, _name="add_inner")
    return op.Tanh(op.Mul(inner, s, _commute=True, _name="scale"), _name="tanh")


def _gelu_outer(arrangement: str, inner):
    """The three ways exporters multiply x, 0.5 and (1 + inner)."""

    def a(op, x, one, half, *rest):
        plus = op.Add(inner(op, x, *rest), one, _commute=True, _name="plus_one")
        if arrangement == "x*plus*half":
            return op.Mul(op.Mul(x, plus, _commute=True, _name="mul_x"), half, _commute=True, _name="mul_half")
        if arrangement == "x*half*plus":
            return op.Mul(op.Mul(x, half, _commute=True, _name="mul_half"), plus, _commute=True, _name="mul_x")
        return op.Mul(x, op.Mul(plus, half, _commute=True, _name="mul_half"), _commute=True, _name="mul_x")

    return a


def _gelu_patterns(kind: str):
    fns = []
    inners = {
        "erf": [("div", _gelu_erf_inner, ["s"]), ("mul", _gelu_erf_inner_mul, ["s"])],
        "tanh": [("pow", _gelu_tanh_inner, ["s", "c", "three"])],
    }[kind]
    for inner_name, inner, extra in inners:
        for arrangement in ("x*plus*half", "x*half*plus", "x*(plus*half)"):
            fn = _gelu_outer(arrangement, inner)
            fn.capture_names = ["x", "one", "half"] + extra
            fn.__name__ = f"gelu_{kind}_{inner_name}_{arrangement}"
            fns.append(fn)
    return fns


def _gelu_check(kind: str):
    def check(m):
        x = m["x"]
        if x.dtype is None or not is_float(x):
            return "not floating point"
        if not _close(m.constant("one"), 1.0) or not _close(m.constant("half"), 0.5):
            return "the constants are not 1 and 0.5"
        scale = m.constant("s")
        if kind == "erf":
            div = m.node("scale").op == "Div"
            if not _close(scale, math.sqrt(2.0) if div else 1 / math.sqrt(2.0)):
                return "the erf argument is not x / sqrt(2)"
        else:
            if (
                not _close(scale, math.sqrt(2 / math.pi))
                or not _close(m.constant("c"), 0.044715)
                or not _close(m.constant("three"), 3.0, 0)
            ):
                return "the tanh-form constants do not match"
        if m.root.outputs[0].shape != x.shape:
            return "the result is broadcast beyond the input"
        return None

    return check


def _gelu(approximate: bool):
    return lambda b, m: hlo(b, "Gelu", m["x"], type=static_type(m["x"]), approximate=approximate)


# ---------------------------------------------------------------------------
# x * sigmoid(x) -> Silu, x * tanh(softplus(x)) -> Mish
# ---------------------------------------------------------------------------


def _same_shape_check(m):
    x = m["x"]
    if x.dtype is None or not is_float(x) or m.root.outputs[0].shape != x.shape:
        return "not a float element-wise product of x with itself"
    return None


def _rules():
    rules = [
        Rule(
            FUSION_PREFIX + "Conv+Add->ConvBias",
            lambda op, x, w, bias: op.Add(op.Conv(x, w, _name="conv"), bias, _commute=True),
            _conv_add,
            check=_conv_add_check,
        ),
        Rule(
            FUSION_PREFIX + "Conv(B)+Add->ConvBias",
            lambda op, x, w, cb, bias: op.Add(op.Conv(x, w, cb, _name="conv"), bias, _commute=True),
            _conv_add,
            check=_conv_add_check,
        ),
        Rule(
            FUSION_PREFIX + "Conv+BatchNormalization->ConvBias",
            lambda op, x, w, scale, bias, mean, var: op.BatchNormalization(
                op.Conv(x, w, _name="conv"), scale, bias, mean, var, _name="bn"
            ),
            _conv_bn,
            check=_conv_bn_check,
        ),
        Rule(
            FUSION_PREFIX + "Conv(B)+BatchNormalization->ConvBias",
            lambda op, x, w, cb, scale, bias, mean, var: op.BatchNormalization(
                op.Conv(x, w, cb, _name="conv"), scale, bias, mean, var, _name="bn"
            ),
            _conv_bn,
            check=_conv_bn_check,
        ),
        Rule(
            FUSION_PREFIX + "MatMul+Add->DotGeneralBias",
            lambda op, a, w, bias: op.Add(op.MatMul(a, w, _name="mm"), bias, _commute=True),
            _matmul_add,
            check=_bias_vector_check,
        ),
        Rule(
            FUSION_PREFIX + "Gemm+Add->DotGeneralBias",
            lambda op, a, w, bias: op.Add(op.Gemm(a, w, _name="mm"), bias, _commute=True),
            _gemm_add,
            check=_gemm_add_check,
        ),
        Rule(
            FUSION_PREFIX + "Mul(x,Sigmoid(x))->Silu",
            lambda op, x: op.Mul(x, op.Sigmoid(x), _commute=True),
            lambda b, m: hlo(b, "Silu", m["x"], type=static_type(m["x"])),
            check=_same_shape_check,
        ),
        Rule(
            FUSION_PREFIX + "Mul(x,Tanh(Softplus(x)))->Mish",
            lambda op, x: op.Mul(x, op.Tanh(op.Softplus(x)), _commute=True),
            lambda b, m: hlo(b, "Mish", m["x"], type=static_type(m["x"])),
            check=_same_shape_check,
        ),
    ]
    # Larger patterns first: an affine LayerNorm must not fuse without its scale and bias.
    for affine in ("both", "scale", "none"):
        for axes_input in (False, True):
            for square in ("pow", "mul"):
                fn = _ln_pattern(axes_input, square, affine)
                rules.append(
                    Rule(
                        FUSION_PREFIX + "LayerNorm-pattern->LayerNorm/" + fn.__name__, fn, _layer_norm, check=_ln_check
                    )
                )
    for kind in ("erf", "tanh"):
        for fn in _gelu_patterns(kind):
            rules.append(
                Rule(
                    FUSION_PREFIX + f"Gelu-{kind}-pattern->Gelu/" + fn.__name__,
                    fn,
                    _gelu(kind == "tanh"),
                    check=_gelu_check(kind),
                )
            )
    return rules


RULES = _rules()
add_rules("onnx", "hlo", RULES)


def fusion_counts(fired) -> dict[str, int]:
    """Fired fusion rules grouped by the fused op they produce (``{"ConvBias": 3, ...}``)."""
    counts: dict[str, int] = {}
    for name, n in fired.items():
        if name.startswith(FUSION_PREFIX):
            target = name.split("->", 1)[1].split("/", 1)[0]
            counts[target] = counts.get(target, 0) + n
    return dict(sorted(counts.items()))

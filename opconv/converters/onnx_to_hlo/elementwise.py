"""Element-wise ONNX ops: arithmetic and comparisons (explicit BroadcastInDim), unary math, activations, Cast, Where.

One-to-one maps are tables (ONNX op -> HLO op) that one translator serves for every op of the table;
decompositions are small translators over the typed builders of ``_common``.
"""

from __future__ import annotations

import numpy as np

from ...types import element_type
from ..lowering import lower
from ._common import (
    Refuse,
    attr,
    binary,
    broadcast_all,
    broadcast_in_dim,
    compare,
    const_input,
    convert,
    dtype_of,
    full,
    hlo,
    is_float,
    np_dtype,
    optional_input,
    out_type,
    reshape,
    scalar,
    select,
    shape_of,
    static_type,
    unary,
)

# ONNX binary op -> HLO op, both with numpy-style operands broadcast explicitly (opset 7 on).
BINARY = {
    "Add": "Add",
    "Sub": "Sub",
    "Mul": "Mul",
    "Div": "Div",
    "Pow": "Pow",
    "And": "And",
    "Or": "Or",
    "Xor": "Xor",
    "BitwiseAnd": "And",
    "BitwiseOr": "Or",
    "BitwiseXor": "Xor",
}

# ONNX comparison -> Compare direction.
COMPARISONS = {"Equal": "EQ", "Less": "LT", "Greater": "GT", "LessOrEqual": "LE", "GreaterOrEqual": "GE"}

# ONNX variadic op -> the HLO binary op folding its inputs left to right.
VARIADIC = {"Sum": "Add", "Max": "Max", "Min": "Min", "Mean": "Add"}

# ONNX unary op -> HLO op, for any element type / for floating-point inputs only.
UNARY = {
    "Abs": "Abs",
    "Neg": "Neg",
    "Ceil": "Ceil",
    "Floor": "Floor",
    "Sign": "Sign",
    "Not": "Not",
    "BitwiseNot": "Not",
    "Relu": "Relu",
}
FLOAT_UNARY = {
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Sin": "Sin",
    "Cos": "Cos",
    "Tan": "Tan",
    "Asin": "Asin",
    "Acos": "Acos",
    "Atan": "Atan",
    "Sinh": "Sinh",
    "Asinh": "Asinh",
    "Atanh": "Atanh",
    "Tanh": "Tanh",
    "Sigmoid": "Sigmoid",
    "Erf": "Erf",
    "Round": "RoundNearestEven",
    "HardSwish": "HardSwish",
    "Mish": "Mish",
}


def _float_input(m) -> str | None:
    """The check of translators whose HLO ops take floating-point operands only."""
    x = m.root.inputs[0]
    return None if is_float(x) else f"{m.root.op} of {dtype_of(x)} is not an HLO floating-point op"


@lower("onnx", "hlo", tuple(BINARY), since=7, inputs=2)
def _binary_op(b, m):
    op = BINARY[m.root.op]
    x, y = m.root.inputs[:2]
    t = out_type(m)
    if op == "Pow" and dtype_of(y) != dtype_of(x):
        y = convert(b, y, dtype_of(x))  # HLO Pow: one element type
    return binary(b, op, x, y, t.dtype)


@lower("onnx", "hlo", tuple(COMPARISONS), since=7, inputs=2)
def _comparison(b, m):
    return compare(b, m.root.inputs[0], m.root.inputs[1], COMPARISONS[m.root.op])


@lower("onnx", "hlo", tuple(VARIADIC), since=6, inputs=None)
def _variadic(b, m):
    op = VARIADIC[m.root.op]
    values = [v for v in m.root.inputs if v is not None]
    y = values[0]
    for v in values[1:]:
        y = binary(b, op, y, v)
    if len(values) == 1:
        y = unary(b, "Copy", y)
    if m.root.op == "Mean" and len(values) > 1:
        y = binary(b, "Div", y, scalar(b, len(values), dtype_of(y), "count"))
    return y


@lower("onnx", "hlo", tuple(UNARY), inputs=1)
def _unary_op(b, m):
    return unary(b, UNARY[m.root.op], m.root.inputs[0])


@lower("onnx", "hlo", tuple(FLOAT_UNARY), inputs=1, check=_float_input)
def _float_unary_op(b, m):
    return unary(b, FLOAT_UNARY[m.root.op], m.root.inputs[0])


def _s(b, x, value):
    return scalar(b, value, dtype_of(x))


@lower("onnx", "hlo", "Cosh", inputs=1, check=_float_input)
def _cosh(b, m):
    x = m.root.inputs[0]
    e = unary(b, "Exp", x)
    en = unary(b, "Exp", unary(b, "Neg", x))
    return binary(b, "Mul", binary(b, "Add", e, en), _s(b, x, 0.5))


@lower("onnx", "hlo", "Acosh", inputs=1, check=_float_input)
def _acosh(b, m):
    x = m.root.inputs[0]
    root = unary(b, "Sqrt", binary(b, "Sub", binary(b, "Mul", x, x), _s(b, x, 1)))
    return unary(b, "Log", binary(b, "Add", x, root))


@lower("onnx", "hlo", "Reciprocal", inputs=1, check=_float_input)
def _reciprocal(b, m):
    x = m.root.inputs[0]
    return binary(b, "Div", _s(b, x, 1), x)


@lower("onnx", "hlo", "Softsign", inputs=1)
def _softsign(b, m):
    x = m.root.inputs[0]
    return binary(b, "Div", x, binary(b, "Add", _s(b, x, 1), unary(b, "Abs", x)))


@lower("onnx", "hlo", "Softplus", inputs=1, check=_float_input)
def _softplus(b, m):
    x = m.root.inputs[0]
    # log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): exact for every x (no threshold switch).
    tail = unary(b, "Log1p", unary(b, "Exp", unary(b, "Neg", unary(b, "Abs", x))))
    return binary(b, "Add", binary(b, "Max", x, _s(b, x, 0)), tail)


@lower("onnx", "hlo", "Elu", inputs=1)
def _elu(b, m):
    return unary(b, "Elu", m.root.inputs[0], alpha=float(attr(m.root, "alpha", 1.0)))


@lower("onnx", "hlo", "Selu", inputs=1)
def _selu(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.67326319217681884765625))
    gamma = float(attr(m.root, "gamma", 1.05070102214813232421875))
    return binary(b, "Mul", unary(b, "Elu", x, alpha=alpha), _s(b, x, gamma))


@lower("onnx", "hlo", "Celu", inputs=1)
def _celu(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.0))
    neg = binary(b, "Mul", unary(b, "Expm1", binary(b, "Div", x, _s(b, x, alpha))), _s(b, x, alpha))
    return binary(b, "Add", binary(b, "Max", x, _s(b, x, 0)), binary(b, "Min", neg, _s(b, x, 0)))


@lower("onnx", "hlo", "LeakyRelu", inputs=1)
def _leaky_relu(b, m):
    return unary(b, "LeakyRelu", m.root.inputs[0], alpha=float(attr(m.root, "alpha", 0.01)))


@lower("onnx", "hlo", "ThresholdedRelu", inputs=1)
def _thresholded_relu(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.0))
    return select(b, compare(b, x, _s(b, x, alpha), "GT"), x, full(b, 0, dtype_of(x), shape_of(x)))


@lower("onnx", "hlo", "HardSigmoid", inputs=1)
def _hard_sigmoid(b, m):
    return unary(
        b,
        "HardSigmoid",
        m.root.inputs[0],
        slope=float(attr(m.root, "alpha", 0.2)),
        offset=float(attr(m.root, "beta", 0.5)),
    )


@lower("onnx", "hlo", "Shrink", inputs=1)
def _shrink(b, m):
    x = m.root.inputs[0]
    lambd, bias = float(attr(m.root, "lambd", 0.5)), float(attr(m.root, "bias", 0.0))
    zero = full(b, 0, dtype_of(x), shape_of(x))
    low = select(b, compare(b, x, _s(b, x, -lambd), "LT"), binary(b, "Add", x, _s(b, x, bias)), zero)
    return select(b, compare(b, x, _s(b, x, lambd), "GT"), binary(b, "Sub", x, _s(b, x, bias)), low)


@lower("onnx", "hlo", "Gelu", inputs=1)
def _gelu(b, m):
    approximate = attr(m.root, "approximate", "none")
    return unary(b, "Gelu", m.root.inputs[0], approximate=approximate == "tanh")


@lower("onnx", "hlo", "Swish", inputs=1)
def _swish(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.0))
    if alpha == 1.0:
        return unary(b, "Swish", x)
    return binary(b, "Mul", x, unary(b, "Sigmoid", binary(b, "Mul", x, _s(b, x, alpha))))


@lower("onnx", "hlo", "PRelu", inputs=2)
def _prelu(b, m):
    x, slope = m.root.inputs[:2]
    x, slope = broadcast_all(b, x, slope)
    return hlo(b, "PRelu", x, slope, type=static_type(x))


@lower("onnx", "hlo", "Mod", inputs=2)
def _mod(b, m):
    x, y = m.root.inputs[:2]
    r = binary(b, "Rem", x, y)  # C fmod: the sign of the dividend
    if attr(m.root, "fmod", 0) or np_dtype(x).kind == "u":
        return r
    if np_dtype(x).kind == "f":
        raise Refuse("Mod with fmod=0 is defined for integers only")
    # Python modulo: add the divisor when the remainder is non-zero and its sign differs from the divisor's.
    zero = _s(b, r, 0)
    fix = binary(
        b, "And", compare(b, r, zero, "NE"), compare(b, compare(b, r, zero, "LT"), compare(b, y, zero, "LT"), "NE")
    )
    return select(b, fix, binary(b, "Add", r, y), r)


@lower("onnx", "hlo", "BitShift", inputs=2)
def _bitshift(b, m):
    x, y = m.root.inputs[:2]
    # Right shifts of signed integers keep the sign (arithmetic), of unsigned ones shift in zeros.
    if attr(m.root, "direction") == "LEFT":
        op = "ShiftLeft"
    else:
        op = "ShiftRightArithmetic" if np_dtype(x).kind == "i" else "ShiftRightLogical"
    return binary(b, op, x, y)


@lower("onnx", "hlo", "IsNaN", inputs=1)
def _is_nan(b, m):
    x = m.root.inputs[0]
    return compare(b, x, x, "NE")


@lower("onnx", "hlo", "IsInf", inputs=1)
def _is_inf(b, m):
    x = m.root.inputs[0]
    pos, neg = int(attr(m.root, "detect_positive", 1)), int(attr(m.root, "detect_negative", 1))
    inf = _s(b, x, np.inf)
    if pos and neg:
        return compare(b, unary(b, "Abs", x), inf, "EQ")
    if pos:
        return compare(b, x, inf, "EQ")
    if neg:
        return compare(b, x, _s(b, x, -np.inf), "EQ")
    return full(b, False, "bool", shape_of(x))


# Element types the dialect has (Convert's type constraints).
HLO_TYPES = frozenset(
    (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
)


@lower("onnx", "hlo", "Cast", inputs=1)
@lower("onnx", "hlo", "CastLike", inputs=(1, 2))
def _cast(b, m):
    x = m.root.inputs[0]
    t = out_type(m)
    for dt in (dtype_of(x), t.dtype):
        if dt not in HLO_TYPES:
            raise Refuse(f"HLO has no element type {dt}")
    if dtype_of(x) == t.dtype:
        return unary(b, "Copy", x)
    if element_type(dtype_of(x)).is_float and t.dtype == "bool":
        return compare(b, x, _s(b, x, 0), "NE")
    return unary(b, "Convert", x, t.dtype)


@lower("onnx", "hlo", "BitCast", inputs=1)
def _bitcast(b, m):
    t = out_type(m)
    if dtype_of(m.root.inputs[0]) not in HLO_TYPES or t.dtype not in HLO_TYPES:
        raise Refuse("HLO has no element type for one side of the BitCast")
    return hlo(b, "BitcastConvert", m.root.inputs[0], type=t)


def _axis_broadcast(b, m, v, x, axis_attr: str = "axis"):
    """A per-tensor (scalar) or per-axis (1-D) quantization parameter broadcast to ``x``'s shape."""
    xs, vs = shape_of(x), shape_of(v)
    if int(attr(m.root, "block_size", 0)):
        raise Refuse("blocked quantization is not mapped")
    if len(vs) == 0 or vs == (1,) and len(xs) != 1:
        return broadcast_in_dim(b, reshape(b, v, ()), xs, [])
    if len(vs) != 1:
        raise Refuse("quantization parameters of rank > 1 are not mapped")
    axis = int(attr(m.root, "axis", 1)) % max(len(xs), 1)
    return broadcast_in_dim(b, v, xs, [axis])


QUANT_TYPES = ("int8", "uint8", "int16", "uint16", "int32")


@lower("onnx", "hlo", "DequantizeLinear", inputs=(2, 3))
def _dequantize(b, m):
    node = m.root
    x, scale = node.inputs[:2]
    zero = optional_input(m, 2)
    if dtype_of(x) not in QUANT_TYPES:
        raise Refuse(f"dequantizing {dtype_of(x)} is not mapped")
    dt = dtype_of(scale)
    y = convert(b, x, dt)
    if zero is not None:
        y = binary(b, "Sub", y, _axis_broadcast(b, m, convert(b, zero, dt), x))
    return binary(b, "Mul", y, _axis_broadcast(b, m, scale, x))


@lower("onnx", "hlo", "QuantizeLinear", inputs=(2, 3))
def _quantize(b, m):
    node = m.root
    x, scale = node.inputs[:2]
    zero = optional_input(m, 2)
    t = out_type(m)
    if t.dtype not in QUANT_TYPES or int(attr(node, "saturate", 1)) != 1:
        raise Refuse(f"quantizing to {t.dtype} is not mapped")
    dt = dtype_of(x)
    y = unary(b, "RoundNearestEven", binary(b, "Div", x, _axis_broadcast(b, m, convert(b, scale, dt), x)))
    if zero is not None:
        y = binary(b, "Add", y, _axis_broadcast(b, m, convert(b, zero, dt), x))
    info = np.iinfo(element_type(t.dtype).numpy)
    y = hlo(b, "Clamp", scalar(b, info.min, dt), y, scalar(b, info.max, dt), type=static_type(y))
    return convert(b, y, t.dtype)


@lower("onnx", "hlo", "Where", inputs=3)
def _where(b, m):
    cond, x, y = m.root.inputs[:3]
    return select(b, cond, x, y)


def _limits(x):
    dt = np_dtype(x)
    return np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)


@lower("onnx", "hlo", "Clip", since=1, inputs=1)
def _clip_1(b, m):
    """Clip-1 and -6: the bounds are attributes."""
    x = m.root.inputs[0]
    info = _limits(x)
    lo = _s(b, x, attr(m.root, "min", info.min))
    hi = _s(b, x, attr(m.root, "max", info.max))
    return hlo(b, "Clamp", lo, x, hi, type=static_type(x))


@lower("onnx", "hlo", "Clip", since=11, inputs=(1, 2, 3))
def _clip_11(b, m):
    """Clip-11 on: the bounds are optional scalar inputs."""
    x = m.root.inputs[0]
    info = _limits(x)
    lo, hi = optional_input(m, 1), optional_input(m, 2)
    lo = _s(b, x, info.min) if lo is None else lo
    hi = _s(b, x, info.max) if hi is None else hi
    if shape_of(lo) != () or shape_of(hi) != ():
        lo, hi = (v if shape_of(v) == () else _reshape_scalar(b, v) for v in (lo, hi))
    return hlo(b, "Clamp", lo, x, hi, type=static_type(x))


def _reshape_scalar(b, v):
    if int(np.prod(shape_of(v))) != 1:
        raise Refuse(f"Clip bound {v.name!r} is not a scalar")
    return reshape(b, v, ())


@lower("onnx", "hlo", "Identity", inputs=1)
def _identity(b, m):
    return m.root.inputs[0]


def _inference_dropout(b, m):
    """Dropout at inference: the data, and a mask of ones when the mask is an output."""
    node = m.root
    outs = [node.inputs[0]]
    if len(node.outputs) > 1:
        mask = node.outputs[1]
        mask_type = static_type(mask) if mask is not None else None
        outs.append(
            None
            if mask_type is None
            else full(b, True if mask_type.dtype == "bool" else 1, mask_type.dtype, mask_type.shape)
        )
    return outs


@lower("onnx", "hlo", "Dropout", since=1, inputs=1, outputs=(1, 2))
def _dropout_1(b, m):
    """Dropout-1 to -10: ``is_test`` (default 0 before version 7, gone in 7) says inference."""
    if not attr(m.root, "is_test", 1 if (m.root.version or 7) >= 7 else 0):
        raise Refuse("Dropout in training mode draws random masks")
    return _inference_dropout(b, m)


@lower("onnx", "hlo", "Dropout", since=12, inputs=(1, 2, 3), outputs=(1, 2), names=("data", "ratio", "training_mode"))
def _dropout_12(b, m):
    """Dropout-12 on: the ``training_mode`` input, when given, must be a constant false."""
    if m["training_mode"] is not None:
        if bool(np.asarray(const_input(m, "training_mode", "Dropout's training_mode")).reshape(())):
            raise Refuse("Dropout with training_mode=true draws random masks")
    return _inference_dropout(b, m)

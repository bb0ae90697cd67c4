"""Element-wise ONNX ops: arithmetic and comparisons (explicit BroadcastInDim), unary math, activations, Cast, Where.

One-to-one maps are tables (ONNX op -> HLO op) turned into rules in a loop;
decompositions are small functions over the typed builders of ``_common``.
"""

from __future__ import annotations

import numpy as np

from ...types import element_type
from ._common import (Refuse, attr, binary, broadcast_all, broadcast_in_dim, reshape, compare, const_input, convert, dtype_of, full,
                      hlo, is_float, np_dtype, op_rules, optional_input, out_type, rules_for_arities, scalar, select,
                      shape_of, static_type, unary)

# ONNX binary op -> HLO op, both with numpy-style operands broadcast explicitly (opset 7 on).
BINARY = {
    "Add": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div", "Pow": "Pow",
    "And": "And", "Or": "Or", "Xor": "Xor",
    "BitwiseAnd": "And", "BitwiseOr": "Or", "BitwiseXor": "Xor",
}

# ONNX comparison -> Compare direction.
COMPARISONS = {"Equal": "EQ", "Less": "LT", "Greater": "GT", "LessOrEqual": "LE", "GreaterOrEqual": "GE"}

# ONNX variadic op -> the HLO binary op folding its inputs left to right.
VARIADIC = {"Sum": "Add", "Max": "Max", "Min": "Min", "Mean": "Add"}

UNARY = {
    "Abs": "Abs", "Neg": "Neg", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt", "Ceil": "Ceil", "Floor": "Floor",
    "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Asin": "Asin", "Acos": "Acos", "Atan": "Atan", "Sinh": "Sinh",
    "Asinh": "Asinh", "Atanh": "Atanh", "Tanh": "Tanh", "Sigmoid": "Sigmoid", "Erf": "Erf", "Sign": "Sign",
    "Not": "Not", "BitwiseNot": "Not", "Relu": "Relu", "Round": "RoundNearestEven", "HardSwish": "HardSwish",
    "Mish": "Mish",
}


def _binary(op: str):
    def replace(b, m):
        x, y = m.root.inputs[:2]
        t = out_type(m)
        if op == "Pow" and dtype_of(y) != dtype_of(x):
            y = convert(b, y, dtype_of(x))  # HLO Pow: one element type
        return binary(b, op, x, y, t.dtype)
    return replace


def _compare(direction: str):
    return lambda b, m: compare(b, m.root.inputs[0], m.root.inputs[1], direction)


def _variadic(op: str, mean: bool = False):
    def replace(b, m):
        values = [v for v in m.root.inputs if v is not None]
        y = values[0]
        for v in values[1:]:
            y = binary(b, op, y, v)
        if len(values) == 1:
            y = unary(b, "Copy", y)
        if mean and len(values) > 1:
            y = binary(b, "Div", y, scalar(b, len(values), dtype_of(y), "count"))
        return y
    return replace


def _unary(op: str):
    return lambda b, m: unary(b, op, m.root.inputs[0])


def _float_only(fn):
    def replace(b, m):
        if not is_float(m.root.inputs[0]):
            raise Refuse(f"{m.root.op} of {dtype_of(m.root.inputs[0])} is not an HLO floating-point op")
        return fn(b, m)
    return replace


def _s(b, x, value):
    return scalar(b, value, dtype_of(x))


def _cosh(b, m):
    x = m.root.inputs[0]
    e = unary(b, "Exp", x)
    en = unary(b, "Exp", unary(b, "Neg", x))
    return binary(b, "Mul", binary(b, "Add", e, en), _s(b, x, 0.5))


def _acosh(b, m):
    x = m.root.inputs[0]
    root = unary(b, "Sqrt", binary(b, "Sub", binary(b, "Mul", x, x), _s(b, x, 1)))
    return unary(b, "Log", binary(b, "Add", x, root))


def _reciprocal(b, m):
    x = m.root.inputs[0]
    return binary(b, "Div", _s(b, x, 1), x)


def _softsign(b, m):
    x = m.root.inputs[0]
    return binary(b, "Div", x, binary(b, "Add", _s(b, x, 1), unary(b, "Abs", x)))


def _softplus(b, m):
    x = m.root.inputs[0]
    # log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): exact for every x (no threshold switch).
    tail = unary(b, "Log1p", unary(b, "Exp", unary(b, "Neg", unary(b, "Abs", x))))
    return binary(b, "Add", binary(b, "Max", x, _s(b, x, 0)), tail)


def _elu(b, m):
    return unary(b, "Elu", m.root.inputs[0], alpha=float(attr(m.root, "alpha", 1.0)))


def _selu(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.67326319217681884765625))
    gamma = float(attr(m.root, "gamma", 1.05070102214813232421875))
    return binary(b, "Mul", unary(b, "Elu", x, alpha=alpha), _s(b, x, gamma))


def _celu(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.0))
    neg = binary(b, "Mul", unary(b, "Expm1", binary(b, "Div", x, _s(b, x, alpha))), _s(b, x, alpha))
    return binary(b, "Add", binary(b, "Max", x, _s(b, x, 0)), binary(b, "Min", neg, _s(b, x, 0)))


def _leaky_relu(b, m):
    return unary(b, "LeakyRelu", m.root.inputs[0], alpha=float(attr(m.root, "alpha", 0.01)))


def _thresholded_relu(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.0))
    return select(b, compare(b, x, _s(b, x, alpha), "GT"), x, full(b, 0, dtype_of(x), shape_of(x)))


def _hard_sigmoid(b, m):
    return unary(b, "HardSigmoid", m.root.inputs[0], slope=float(attr(m.root, "alpha", 0.2)),
                 offset=float(attr(m.root, "beta", 0.5)))


def _shrink(b, m):
    x = m.root.inputs[0]
    lambd, bias = float(attr(m.root, "lambd", 0.5)), float(attr(m.root, "bias", 0.0))
    zero = full(b, 0, dtype_of(x), shape_of(x))
    low = select(b, compare(b, x, _s(b, x, -lambd), "LT"), binary(b, "Add", x, _s(b, x, bias)), zero)
    return select(b, compare(b, x, _s(b, x, lambd), "GT"), binary(b, "Sub", x, _s(b, x, bias)), low)


def _gelu(b, m):
    approximate = attr(m.root, "approximate", "none")
    return unary(b, "Gelu", m.root.inputs[0], approximate=approximate == "tanh")


def _swish(b, m):
    x = m.root.inputs[0]
    alpha = float(attr(m.root, "alpha", 1.0))
    if alpha == 1.0:
        return unary(b, "Swish", x)
    return binary(b, "Mul", x, unary(b, "Sigmoid", binary(b, "Mul", x, _s(b, x, alpha))))


def _prelu(b, m):
    x, slope = m.root.inputs[:2]
    x, slope = broadcast_all(b, x, slope)
    return hlo(b, "PRelu", x, slope, type=static_type(x))


def _mod(b, m):
    x, y = m.root.inputs[:2]
    r = binary(b, "Rem", x, y)  # C fmod: the sign of the dividend
    if attr(m.root, "fmod", 0) or np_dtype(x).kind == "u":
        return r
    if np_dtype(x).kind == "f":
        raise Refuse("Mod with fmod=0 is defined for integers only")
    # Python modulo: add the divisor when the remainder is non-zero and its sign differs from the divisor's.
    zero = _s(b, r, 0)
    fix = binary(b, "And", compare(b, r, zero, "NE"),
                 compare(b, compare(b, r, zero, "LT"), compare(b, y, zero, "LT"), "NE"))
    return select(b, fix, binary(b, "Add", r, y), r)


def _bitshift(b, m):
    x, y = m.root.inputs[:2]
    # Right shifts of signed integers keep the sign (arithmetic), of unsigned ones shift in zeros.
    if attr(m.root, "direction") == "LEFT":
        op = "ShiftLeft"
    else:
        op = "ShiftRightArithmetic" if np_dtype(x).kind == "i" else "ShiftRightLogical"
    return binary(b, op, x, y)


def _is_nan(b, m):
    x = m.root.inputs[0]
    return compare(b, x, x, "NE")


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
HLO_TYPES = frozenset(("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                       "bfloat16", "float32", "float64", "complex64", "complex128"))


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


def _where(b, m):
    cond, x, y = m.root.inputs[:3]
    return select(b, cond, x, y)


def _clip(b, m):
    x = m.root.inputs[0]
    dt = np_dtype(x)
    info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)
    if (m.root.version or 11) < 11:
        lo = _s(b, x, attr(m.root, "min", info.min))
        hi = _s(b, x, attr(m.root, "max", info.max))
    else:
        lo, hi = optional_input(m, 1), optional_input(m, 2)
        lo = _s(b, x, info.min) if lo is None else lo
        hi = _s(b, x, info.max) if hi is None else hi
        if shape_of(lo) != () or shape_of(hi) != ():
            lo, hi = (v if shape_of(v) == () else _reshape_scalar(b, v) for v in (lo, hi))
    return hlo(b, "Clamp", lo, x, hi, type=static_type(x))


def _reshape_scalar(b, v):
    from ._common import reshape
    if int(np.prod(shape_of(v))) != 1:
        raise Refuse(f"Clip bound {v.name!r} is not a scalar")
    return reshape(b, v, ())


def _identity(b, m):
    return m.root.inputs[0]


def _dropout(b, m):
    node = m.root
    if (node.version or 12) >= 12:
        training = optional_input(m, 2)
        if training is not None:
            data = const_input(m, f"x{2}", "Dropout's training_mode")
            if bool(np.asarray(data).reshape(())):
                raise Refuse("Dropout with training_mode=true draws random masks")
    elif not attr(node, "is_test", 1 if (node.version or 7) >= 7 else 0):
        raise Refuse("Dropout in training mode draws random masks")
    outs = [node.inputs[0], None]
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        mask_type = static_type(node.outputs[1])
        outs[1] = full(b, True if mask_type.dtype == "bool" else 1, mask_type.dtype, mask_type.shape)
    return outs


def _rules():
    rules = []
    for onnx_op, op in BINARY.items():
        rules += rules_for_arities(f"{onnx_op}-to-{op}", onnx_op, _binary(op), [2],
                                  _version=lambda v: v is None or v >= 7)
    for onnx_op, direction in COMPARISONS.items():
        rules += rules_for_arities(f"{onnx_op}-to-Compare", onnx_op, _compare(direction), [2],
                                  _version=lambda v: v is None or v >= 7)
    for onnx_op, op in VARIADIC.items():
        rules += rules_for_arities(f"{onnx_op}-to-{op}", onnx_op, _variadic(op, onnx_op == "Mean"), range(1, 9),
                                  _version=lambda v: v is None or v >= 6)
    for onnx_op, op in UNARY.items():
        replace = _unary(op)
        if onnx_op in ("Round", "Erf", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt") or onnx_op in (
                "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Asinh", "Atanh", "HardSwish", "Mish"):
            replace = _float_only(replace)
        rules += rules_for_arities(f"{onnx_op}-to-{op}", onnx_op, replace, [1])
    decompositions = {
        "Cosh": _float_only(_cosh), "Acosh": _float_only(_acosh), "Reciprocal": _float_only(_reciprocal),
        "Softsign": _softsign, "Softplus": _float_only(_softplus), "Elu": _elu, "Selu": _selu, "Celu": _celu,
        "LeakyRelu": _leaky_relu, "ThresholdedRelu": _thresholded_relu, "HardSigmoid": _hard_sigmoid,
        "Shrink": _shrink, "Gelu": _gelu, "Swish": _swish, "IsNaN": _is_nan, "IsInf": _is_inf, "Cast": _cast,
        "CastLike": _cast, "Identity": _identity,
    }
    for onnx_op, replace in decompositions.items():
        rules += rules_for_arities(f"{onnx_op}-to-HLO", onnx_op, replace, [1, 2] if onnx_op == "CastLike" else [1])
    rules += rules_for_arities("PRelu-to-PRelu", "PRelu", _prelu, [2])
    rules += rules_for_arities("Mod-to-Rem", "Mod", _mod, [2])
    rules += rules_for_arities("BitShift-to-Shift", "BitShift", _bitshift, [2])
    rules += rules_for_arities("BitCast-to-BitcastConvert", "BitCast", _bitcast, [1])
    rules += op_rules("DequantizeLinear-to-Convert", "DequantizeLinear", _dequantize, 3, 2)
    rules += op_rules("QuantizeLinear-to-Convert", "QuantizeLinear", _quantize, 3, 2)
    rules += rules_for_arities("Where-to-Select", "Where", _where, [3])
    rules += op_rules("Clip-to-Clamp", "Clip", _clip, 3)
    rules += op_rules("Dropout-to-identity", "Dropout", _dropout, 3, _outputs=2)
    return rules


RULES = _rules()

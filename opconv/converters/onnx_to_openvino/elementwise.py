"""Element-wise ONNX ops: arithmetic (numpy broadcasting), unary math and activations.

One-to-one maps are tables (ONNX op -> opset1 op), each line stating one mapping; one translator serves every
op of a table and reads the opset1 op from it.
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const, np_dtype, ov, variadic_inputs

# ONNX binary ops with numpy broadcasting (opset 7 on; earlier versions used the `broadcast` attribute).
BINARY = {
    "Add": "Add",
    "Sub": "Subtract",
    "Mul": "Multiply",
    "Div": "Divide",
    "Pow": "Power",
    "Equal": "Equal",
    "Less": "Less",
    "Greater": "Greater",
    "LessOrEqual": "LessEqual",
    "GreaterOrEqual": "GreaterEqual",
    "And": "LogicalAnd",
    "Or": "LogicalOr",
    "Xor": "NotEqual",  # on booleans; OpenVINO reads LogicalXor as an opset2 layer
}

UNARY = {
    "Relu": "ReLU",
    "Sigmoid": "Sigmoid",
    "Tanh": "Tanh",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Abs": "Abs",
    "Neg": "Negative",
    "Erf": "Erf",
    "Floor": "Floor",
    "Ceil": "Ceiling",
    "Sign": "Sign",
    "Sin": "Sin",
    "Cos": "Cos",
    "Tan": "Tan",
    "Asin": "Asin",
    "Acos": "Acos",
    "Atan": "Atan",
    "Sinh": "Sinh",
    "Cosh": "Cosh",
    "Not": "LogicalNot",
}


@lower("onnx", "openvino", tuple(BINARY), since=7, inputs=2, names=("a", "b"))
def _binary(b, m):
    return _binary_op(b, BINARY[m.root.op], m["a"], m["b"])


def _binary_op(b, ov_op: str, a, c):
    if a.dtype is not None and c.dtype is not None and a.dtype != c.dtype:
        if ov_op == "Power":
            return _mixed_power(b, a, c)
        raise Refuse(f"inputs have different element types ({a.dtype}, {c.dtype})")
    extra = {}
    if ov_op == "Divide" and a.dtype is not None and np.dtype(np_dtype(a)).kind in "iu":
        extra["m_pythondiv"] = False  # ONNX integer Div truncates toward zero, like C
    return ov(b, ov_op, a, c, auto_broadcast="numpy", **extra)


def _mixed_power(b, base, exponent):
    """ONNX Pow allows an exponent of another type; opset1 Power needs one element type (the base's)."""
    if np.dtype(np_dtype(base)).kind == "f":
        return ov(b, "Power", base, ov(b, "Convert", exponent, destination_type=base.dtype), auto_broadcast="numpy")
    if np.dtype(np_dtype(exponent)).kind != "f":
        raise Refuse(f"inputs have different integer element types ({base.dtype}, {exponent.dtype})")
    # An integer base with a float exponent: computed in the exponent's type, truncated back like a cast.
    wide = ov(b, "Power", ov(b, "Convert", base, destination_type=exponent.dtype), exponent, auto_broadcast="numpy")
    return ov(b, "Convert", wide, destination_type=base.dtype)


@lower("onnx", "openvino", tuple(UNARY), inputs=1, names=("x",))
def _unary(b, m):
    return ov(b, UNARY[m.root.op], m["x"])


@lower("onnx", "openvino", "LeakyRelu", inputs=1, names=("x",))
def _leaky_relu(b, m):
    x = m["x"]
    slope = const(b, [attr(m.root, "alpha", 0.01)], np_dtype(x), "slope")
    return ov(b, "PReLU", x, slope)


@lower("onnx", "openvino", "Elu", inputs=1, names=("x",))
def _elu(b, m):
    return ov(b, "Elu", m["x"], alpha=float(attr(m.root, "alpha", 1.0)))


@lower("onnx", "openvino", "Reciprocal", inputs=1, names=("x",))
def _reciprocal(b, m):
    x = m["x"]
    if np.dtype(np_dtype(x)).kind != "f":
        raise Refuse("Reciprocal of integers is not defined the same way (ONNX: floats only)")
    return ov(b, "Divide", const(b, 1, np_dtype(x), "one"), x, auto_broadcast="numpy")


@lower("onnx", "openvino", "Where", inputs=3, names=("cond", "a", "b"))
def _where(b, m):
    return ov(b, "Select", m["cond"], m["a"], m["b"], auto_broadcast="numpy")


def _limits(x):
    dtype = np_dtype(x)
    return np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)


@lower("onnx", "openvino", "Clip", inputs=1, names=("x",))
def _clip_1(b, m):
    """Clamp between the ``min`` and ``max`` attributes (the type's limits when omitted)."""
    x, info = m["x"], _limits(m["x"])
    return ov(b, "Clamp", x, min=float(attr(m.root, "min", info.min)), max=float(attr(m.root, "max", info.max)))


@lower("onnx", "openvino", "Clip", since=11, inputs=(1, 2, 3), names=("x", "lo", "hi"))
def _clip_11(b, m):
    """Clamp when the bounds are constant inputs (or omitted); a bound computed at run time becomes Maximum /
    Minimum."""
    x, info = m["x"], _limits(m["x"])
    bounds, dynamic = [], []
    for i, name, default in ((1, "lo", info.min), (2, "hi", info.max)):
        v = m.root.inputs[i] if len(m.root.inputs) > i else None
        data = None if v is None else m.constant(name)
        if v is not None and data is None:
            dynamic.append((name, v))
            bounds.append(float(default))
        else:
            bounds.append(float(default) if v is None else float(np.asarray(data).reshape(())))
    y = ov(b, "Clamp", x, min=bounds[0], max=bounds[1])
    for name, v in dynamic:
        y = ov(b, "Maximum" if name == "lo" else "Minimum", y, v, auto_broadcast="numpy")
    return y


@lower("onnx", "openvino", "Mod", inputs=2, names=("a", "b"))
def _mod(b, m):
    a, c = m["a"], m["b"]
    if a.dtype != c.dtype:
        raise Refuse(f"inputs have different element types ({a.dtype}, {c.dtype})")
    # fmod=0: the remainder takes the divisor's sign (floor); fmod=1: the dividend's (C fmod).
    if not attr(m.root, "fmod", 0) and np.dtype(np_dtype(a)).kind == "f":
        # OpenVINO's float FloorMod (and Mod) differ from C at infinite operands: take the truncated remainder
        # (x for an infinite divisor, NaN for an infinite dividend) and move a non-zero one whose sign differs
        # from the divisor's by one divisor.
        dtype = np_dtype(a)
        inf = const(b, np.inf, dtype, "inf")
        rest = ov(b, "Mod", a, c, auto_broadcast="numpy")
        rest = ov(
            b, "Select", ov(b, "Equal", ov(b, "Abs", c), inf, auto_broadcast="numpy"), a, rest, auto_broadcast="numpy"
        )
        rest = ov(
            b,
            "Select",
            ov(b, "Equal", ov(b, "Abs", a), inf, auto_broadcast="numpy"),
            const(b, np.nan, dtype, "nan"),
            rest,
            auto_broadcast="numpy",
        )
        zero = const(b, 0, dtype, "zero")
        signs_differ = ov(
            b,
            "NotEqual",
            ov(b, "Less", rest, zero, auto_broadcast="numpy"),
            ov(b, "Less", c, zero, auto_broadcast="numpy"),
            auto_broadcast="numpy",
        )
        moves = ov(
            b, "LogicalAnd", signs_differ, ov(b, "NotEqual", rest, zero, auto_broadcast="numpy"), auto_broadcast="numpy"
        )
        return ov(b, "Select", moves, ov(b, "Add", rest, c, auto_broadcast="numpy"), rest, auto_broadcast="numpy")
    return ov(b, "Mod" if attr(m.root, "fmod", 0) else "FloorMod", a, c, auto_broadcast="numpy")


@lower("onnx", "openvino", "BitwiseNot", inputs=1, names=("x",))
def _bitwise_not(b, m):
    """~x without bit operations: -x - 1 in two's complement, max - x for unsigned integers."""
    x = m["x"]
    dtype = np.dtype(np_dtype(x))
    if dtype.kind == "b":
        return ov(b, "LogicalNot", x)
    if dtype.kind == "u":
        return ov(b, "Subtract", const(b, np.iinfo(dtype).max, dtype, "max"), x, auto_broadcast="numpy")
    return ov(b, "Subtract", ov(b, "Negative", x), const(b, 1, dtype, "one"), auto_broadcast="numpy")


@lower("onnx", "openvino", "BitShift", inputs=2, names=("a", "b"))
def _bit_shift(b, m):
    """x * 2**y or floor(x / 2**y) for unsigned x; the power is exact in float32 up to 2**31."""
    x, y = m["a"], m["b"]
    kind = np.dtype(np_dtype(x))
    if kind.kind == "i" and kind.itemsize <= 4:
        return _signed_bit_shift(b, m, x, y, kind)
    if kind.kind != "u" or kind.itemsize > 2:
        raise Refuse(f"BitShift of {x.dtype} (decomposed for uint8/uint16 and int8/int16/int32)")
    power = ov(
        b,
        "Power",
        const(b, 2, np.float32, "two"),
        ov(b, "Convert", y, destination_type="float32"),
        auto_broadcast="numpy",
    )
    wide = ov(b, "Convert", x, destination_type="float32")
    if attr(m.root, "direction", "LEFT") in ("LEFT", b"LEFT"):
        # Bits shifted past the type's width are lost: keep the product modulo 2**bits.
        shifted = ov(
            b,
            "FloorMod",
            ov(b, "Multiply", wide, power, auto_broadcast="numpy"),
            const(b, 2.0 ** (8 * kind.itemsize), np.float32, "modulus"),
            auto_broadcast="numpy",
        )
    else:
        shifted = ov(b, "Floor", ov(b, "Divide", wide, power, auto_broadcast="numpy"))
    return ov(b, "Convert", shifted, destination_type=x.dtype)


def _signed_bit_shift(b, m, x, y, kind: np.dtype):
    """Signed shifts in int32 arithmetic: x * 2**y wrapped to the type's width, or floor(x / 2**y).

    2**y comes from a table (opset1 has no integer power); a shift outside [0, bits) gives 0, or -1 for a
    negative x shifted right, as ONNX defines."""
    bits = 8 * kind.itemsize
    wide = ov(b, "Convert", x, destination_type="int32") if bits < 32 else x
    count = ov(b, "Convert", y, destination_type="int32") if y.dtype != "int32" else y
    outside = ov(
        b,
        "LogicalOr",
        ov(b, "Less", count, const(b, 0, np.int32, "zero"), auto_broadcast="numpy"),
        ov(b, "GreaterEqual", count, const(b, bits, np.int32, "bits"), auto_broadcast="numpy"),
        auto_broadcast="numpy",
    )
    index = ov(b, "Clamp", count, min=0.0, max=float(bits - 1))
    powers = b.const((np.int64(1) << np.arange(bits, dtype=np.int64)).astype(np.uint32).view(np.int32), "powers")
    power = ov(b, "Gather", powers, index, const(b, [0], np.int64, "axis"))
    zero = const(b, 0, np.int32, "zero")
    if attr(m.root, "direction", "LEFT") in ("LEFT", b"LEFT"):
        if bits == 32:
            # 2**31 is stored as -2**31: multiplying by it still leaves x's lowest bit in the sign bit.
            shifted = ov(b, "Multiply", wide, power, auto_broadcast="numpy")
        else:
            # |x| * 2**y < 2**30 fits int32; keep the low `bits` bits as a signed value.
            half = const(b, 1 << (bits - 1), np.int32, "half")
            product = ov(b, "Multiply", wide, power, auto_broadcast="numpy")
            shifted = ov(
                b,
                "Subtract",
                ov(
                    b,
                    "FloorMod",
                    ov(b, "Add", product, half, auto_broadcast="numpy"),
                    const(b, 1 << bits, np.int32, "modulus"),
                    auto_broadcast="numpy",
                ),
                half,
                auto_broadcast="numpy",
            )
        result = ov(b, "Select", outside, zero, shifted, auto_broadcast="numpy")
    else:
        if bits == 32:
            # The divisor 2**31 does not fit int32, but x >> 31 is the sign fill, as for a shift past the width.
            outside = ov(
                b,
                "LogicalOr",
                outside,
                ov(b, "Equal", count, const(b, 31, np.int32, "last"), auto_broadcast="numpy"),
                auto_broadcast="numpy",
            )
        # floor(x / 2**y) from the truncating division (OpenVINO's CPU plugin truncates integer Divide even
        # with m_pythondiv): one less where x is negative and the division leaves a remainder.
        quotient = ov(b, "Divide", wide, power, auto_broadcast="numpy", m_pythondiv=False)
        inexact = ov(
            b, "NotEqual", ov(b, "Multiply", quotient, power, auto_broadcast="numpy"), wide, auto_broadcast="numpy"
        )
        below = ov(b, "LogicalAnd", inexact, ov(b, "Less", wide, zero, auto_broadcast="numpy"), auto_broadcast="numpy")
        shifted = ov(
            b,
            "Select",
            below,
            ov(b, "Subtract", quotient, const(b, 1, np.int32, "one"), auto_broadcast="numpy"),
            quotient,
            auto_broadcast="numpy",
        )
        sign = ov(
            b,
            "Select",
            ov(b, "Less", wide, zero, auto_broadcast="numpy"),
            const(b, -1, np.int32, "minus_one"),
            zero,
            auto_broadcast="numpy",
        )
        result = ov(b, "Select", outside, sign, shifted, auto_broadcast="numpy")
    return result if bits == 32 else ov(b, "Convert", result, destination_type=x.dtype)


# Sum / Max / Min / Mean of any number of inputs: a chain of binary ops.
VARIADIC = {"Sum": "Add", "Max": "Maximum", "Min": "Minimum", "Mean": "Add"}


@lower("onnx", "openvino", tuple(VARIADIC), inputs=None)
def _variadic(b, m):
    inputs = variadic_inputs(m)
    ov_op = VARIADIC[m.root.op]
    if len(inputs) == 2 and m.root.op in ("Max", "Min"):
        return _binary_op(b, ov_op, *inputs)
    kinds = {v.dtype for v in inputs}
    if len(kinds) != 1 or None in kinds:
        raise Refuse(f"inputs have different or unknown element types ({sorted(map(str, kinds))})")
    if len(inputs) == 1 and m.root.op != "Mean":
        return ov(b, "Convert", inputs[0], destination_type=inputs[0].dtype)
    total = inputs[0]
    for v in inputs[1:]:
        total = ov(b, ov_op, total, v, auto_broadcast="numpy")
    if m.root.op == "Mean":
        if np.dtype(np_dtype(inputs[0])).kind != "f":
            raise Refuse("Mean of integers")
        total = ov(b, "Divide", total, const(b, len(inputs), np_dtype(inputs[0]), "count"), auto_broadcast="numpy")
    return total

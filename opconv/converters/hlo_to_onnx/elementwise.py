"""Element-wise HLO ops -> ONNX: arithmetic, comparisons, unary math, activations, Convert, Select, Clamp.

HLO binary operands have equal shapes, or the lower-rank one is placed by
``broadcast_dimensions`` (XLA style); ONNX broadcasts numpy-style, so such an
operand is reshaped (and transposed when its dims are out of order) first.
"""

from __future__ import annotations

import numpy as np

from ._common import Ctx, Refuse, lower, np_dtype, place_dims, shape_of

BINARY = {"Add": "Add", "Sub": "Sub", "Div": "Div", "Max": "Max", "Min": "Min", "Pow": "Pow"}
LOGICAL = {"And": ("And", "BitwiseAnd"), "Or": ("Or", "BitwiseOr"), "Xor": ("Xor", "BitwiseXor")}
COMPARE = {"EQ": "Equal", "LT": "Less", "GT": "Greater", "LE": "LessOrEqual", "GE": "GreaterOrEqual"}
UNARY = {
    "Abs": "Abs",
    "Neg": "Neg",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Ceil": "Ceil",
    "Floor": "Floor",
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
    "Sign": "Sign",
    "Relu": "Relu",
    "RoundNearestEven": "Round",
    "Copy": "Identity",
    "HardSwish": "HardSwish",
}


def placed(c: Ctx, v, out_shape):
    """``v`` arranged for numpy broadcasting to ``out_shape`` following the node's ``broadcast_dimensions``."""
    dims = c.a.get("broadcast_dimensions")
    vs = shape_of(v)
    if not dims or len(vs) == len(out_shape):
        return v
    dims = [int(d) for d in dims]
    if len(dims) != len(vs):
        raise Refuse("broadcast_dimensions does not match the operand rank")
    return place_dims(c, v, dims, len(out_shape))[0]


def _operands(c: Ctx, x, y):
    out = c.out_shape()
    return placed(c, x, out), placed(c, y, out)


def _binary(op: str):
    def translate(c: Ctx, x, y):
        x, y = _operands(c, x, y)
        if op == "Pow" and y.dtype != x.dtype:
            y = c.onnx("Cast", y, to=c.onnx_type(x.dtype))
        return c.onnx(op, x, y)

    return translate


for _hlo, _onnx in BINARY.items():
    lower(_hlo, inputs=2)(_binary(_onnx))


def _logical(ops):
    def translate(c: Ctx, x, y):
        x, y = _operands(c, x, y)
        if x.dtype == "bool":
            return c.onnx(ops[0], x, y)
        if c.opset < 18:
            raise Refuse(f"{ops[1]} needs opset 18")
        return c.onnx(ops[1], x, y)

    return translate


for _hlo, _ops in LOGICAL.items():
    lower(_hlo, inputs=2)(_logical(_ops))


@lower("Rem", inputs=2)
def rem(c: Ctx, x, y):
    return c.onnx("Mod", x, y, fmod=1)


@lower("ShiftLeft", inputs=2)
def shift_left(c: Ctx, x, y):
    if np_dtype(x).kind != "u":
        raise Refuse("ONNX BitShift takes unsigned integers")
    return c.onnx("BitShift", *_operands(c, x, y), direction="LEFT")


@lower("ShiftRightLogical", inputs=2)
def shift_right(c: Ctx, x, y):
    if np_dtype(x).kind != "u":
        raise Refuse("ONNX BitShift takes unsigned integers")
    return c.onnx("BitShift", *_operands(c, x, y), direction="RIGHT")


@lower("Compare", inputs=2)
def compare(c: Ctx, x, y):
    direction = c.a["comparison_direction"]
    if direction == "NE":
        return c.onnx("Not", c.onnx("Equal", x, y))
    if direction not in COMPARE:
        raise Refuse(f"comparison_direction {direction!r}")
    return c.onnx(COMPARE[direction], x, y)


@lower("Select", inputs=3)
def select(c: Ctx, pred, on_true, on_false):
    return c.onnx("Where", pred, on_true, on_false)


@lower("Clamp", inputs=3)
def clamp(c: Ctx, lo, x, hi):
    if not shape_of(lo) and not shape_of(hi):
        return c.onnx("Clip", x, lo, hi)
    return c.onnx("Min", c.onnx("Max", x, lo), hi)


for _hlo, _onnx in UNARY.items():
    lower(_hlo, inputs=1)(lambda c, x, _op=_onnx: c.onnx(_op, x))


@lower("Not", inputs=1)
def not_(c: Ctx, x):
    if x.dtype == "bool":
        return c.onnx("Not", x)
    if c.opset < 18:
        raise Refuse("BitwiseNot needs opset 18")
    return c.onnx("BitwiseNot", x)


@lower("Rsqrt", inputs=1)
def rsqrt(c: Ctx, x):
    return c.onnx("Reciprocal", c.onnx("Sqrt", x))


@lower("Expm1", inputs=1)
def expm1(c: Ctx, x):
    return c.onnx("Sub", c.onnx("Exp", x), c.scalar_like(1, x))


@lower("Log1p", inputs=1)
def log1p(c: Ctx, x):
    return c.onnx("Log", c.onnx("Add", x, c.scalar_like(1, x)))


@lower("Round", inputs=1)
def round_half_away(c: Ctx, x):
    floor = c.onnx("Floor", c.onnx("Add", c.onnx("Abs", x), c.scalar_like(0.5, x)))
    return c.onnx("Mul", c.onnx("Sign", x), floor)


@lower("IsFinite", inputs=1)
def is_finite(c: Ctx, x):
    return c.onnx("Not", c.onnx("Or", c.onnx("IsInf", x), c.onnx("IsNaN", x)))


@lower("Relu6", inputs=1)
def relu6(c: Ctx, x):
    return c.onnx("Clip", x, c.scalar_like(0, x), c.scalar_like(6, x))


@lower("Convert", inputs=1)
def convert(c: Ctx, x):
    return c.onnx("Cast", x, to=c.onnx_type(c.out_type().dtype))


@lower("BitcastConvert", inputs=1)
def bitcast(c: Ctx, x):
    if c.opset < 26:
        raise Refuse("BitCast needs opset 26")
    return c.onnx("BitCast", x, to=c.onnx_type(c.out_type().dtype))


@lower("Elu", inputs=1)
def elu(c: Ctx, x):
    return c.onnx("Elu", x, alpha=c.a["alpha"])


@lower("LeakyRelu", inputs=1)
def leaky_relu(c: Ctx, x):
    return c.onnx("LeakyRelu", x, alpha=c.a["alpha"])


@lower("HardSigmoid", inputs=1)
def hard_sigmoid(c: Ctx, x):
    return c.onnx("HardSigmoid", x, alpha=c.a["slope"], beta=c.a["offset"])


@lower("PRelu", inputs=2)
def prelu(c: Ctx, x, slope):
    return c.onnx("PRelu", x, slope)


def _x_sigmoid(c: Ctx, x):
    return c.onnx("Mul", x, c.onnx("Sigmoid", x))


lower("Silu", inputs=1)(_x_sigmoid)
lower("Swish", inputs=1)(_x_sigmoid)


@lower("Mish", inputs=1)
def mish(c: Ctx, x):
    if c.opset >= 18:
        return c.onnx("Mish", x)
    return c.onnx("Mul", x, c.onnx("Tanh", c.onnx("Softplus", x)))


def gelu_of(c: Ctx, x, approximate: bool):
    if c.opset >= 20:
        return c.onnx("Gelu", x, approximate="tanh" if approximate else "none")
    half = c.onnx("Mul", x, c.scalar_like(0.5, x))
    if approximate:
        cube = c.onnx("Mul", c.onnx("Mul", x, x), x)
        inner = c.onnx("Add", x, c.onnx("Mul", cube, c.scalar_like(0.044715, x)))
        t = c.onnx("Tanh", c.onnx("Mul", inner, c.scalar_like(np.sqrt(2 / np.pi), x)))
    else:
        t = c.onnx("Erf", c.onnx("Div", x, c.scalar_like(np.sqrt(2.0), x)))
    return c.onnx("Mul", half, c.onnx("Add", t, c.scalar_like(1, x)))


@lower("Gelu", inputs=1)
def gelu(c: Ctx, x):
    return gelu_of(c, x, bool(c.a["approximate"]))


@lower("Softplus", inputs=1)
def softplus(c: Ctx, x):
    beta = float(c.a["beta"])
    if beta == 1.0:
        return c.onnx("Softplus", x)
    scaled = c.onnx("Softplus", c.onnx("Mul", x, c.scalar_like(beta, x)))
    return c.onnx("Div", scaled, c.scalar_like(beta, x))


def _split_halves(c: Ctx, x, dim: int):
    rank = len(shape_of(x))
    dim = dim % rank
    half = shape_of(x)[dim] // 2
    return c.onnx("Split", x, c.i64([half, half]), axis=dim, _outputs=2)


@lower("Glu", inputs=1)
def glu(c: Ctx, x):
    a, b = _split_halves(c, x, int(c.a["dim"]))
    return c.onnx("Mul", a, c.onnx("Sigmoid", b))


@lower("GeGlu", inputs=1)
def geglu(c: Ctx, x):
    a, b = _split_halves(c, x, int(c.a["dim"]))
    return c.onnx("Mul", a, gelu_of(c, b, bool(c.a["approximate"])))


@lower("Gtu", inputs=1)
def gtu(c: Ctx, x):
    a, b = _split_halves(c, x, int(c.a["dim"]))
    return c.onnx("Mul", c.onnx("Tanh", a), c.onnx("Sigmoid", b))


@lower("Dropout", inputs=1)
def dropout(c: Ctx, x):
    if c.a.get("training_mode"):
        raise Refuse("Dropout in training mode draws random masks")
    return c.onnx("Identity", x)


@lower("Cbrt", inputs=1)
def cbrt(c: Ctx, x):
    if np_dtype(x).kind != "f":
        x = c.onnx("Cast", x, to=c.onnx_type(c.out_type().dtype))
    root = c.onnx("Pow", c.onnx("Abs", x), c.scalar_like(1.0 / 3.0, x))
    return c.onnx("Mul", c.onnx("Sign", x), root)


@lower("Atan2", inputs=2)
def atan2(c: Ctx, y, x):
    """atan(y / x), moved by +-pi into the right quadrant when x < 0 (x = 0 gives +-pi/2 by the sign of y)."""
    zero = c.scalar_like(0, x)
    base = c.onnx("Atan", c.onnx("Div", y, x))
    pi = c.onnx("Where", c.onnx("Less", y, zero), c.scalar_like(-np.pi, x), c.scalar_like(np.pi, x))
    shifted = c.onnx("Where", c.onnx("Less", x, zero), c.onnx("Add", base, pi), base)
    half = c.onnx("Mul", c.onnx("Sign", y), c.scalar_like(np.pi / 2, x))
    return c.onnx("Where", c.onnx("Equal", x, zero), half, shifted)

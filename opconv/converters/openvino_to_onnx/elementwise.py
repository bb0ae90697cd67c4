"""Element-wise opset1 layers -> ONNX: arithmetic, comparison, logic, unary math, activations, Convert.

opset1's ``auto_broadcast`` is ``numpy`` (ONNX's multidirectional rule) or
``none`` (equal shapes, which ONNX's rule also accepts); ``pdpd`` has no ONNX
form and is refused.
"""

from __future__ import annotations

import numpy as np

from ...types import element_type
from ._common import Ctx, Refuse, const_scalar, lower, np_dtype, rank_of


def _check_broadcast(c: Ctx) -> None:
    mode = str(c.a.get("auto_broadcast") or "numpy").lower()
    if mode not in ("numpy", "none"):
        raise Refuse(f"auto_broadcast={mode!r} has no ONNX form")


# opset1 binary layer -> the ONNX op computing the same thing (with the same result type).
_BINARY = {
    "Add": "Add",
    "Subtract": "Sub",
    "Multiply": "Mul",
    "Maximum": "Max",
    "Minimum": "Min",
    "Power": "Pow",
    "Equal": "Equal",
    "NotEqual": None,
    "Less": "Less",
    "LessEqual": "LessOrEqual",
    "Greater": "Greater",
    "GreaterEqual": "GreaterOrEqual",
    "LogicalAnd": "And",
    "LogicalOr": "Or",
    "LogicalXor": "Xor",
    "Xor": "Xor",
}


def _binary(onnx_op: str):
    def translate(c: Ctx, a, b):
        _check_broadcast(c)
        return c.onnx(onnx_op, a, b)

    return translate


for _op, _onnx in _BINARY.items():
    if _onnx is not None:
        lower(_op, 2)(_binary(_onnx))


@lower("NotEqual", 2)
def not_equal(c: Ctx, a, b):
    _check_broadcast(c)
    return c.onnx("Not", c.onnx("Equal", a, b))


@lower("SquaredDifference", 2)
def squared_difference(c: Ctx, a, b):
    _check_broadcast(c)
    d = c.onnx("Sub", a, b)
    return c.onnx("Mul", d, d)


@lower("Divide", 2)
def divide(c: Ctx, a, b):
    _check_broadcast(c)
    if np_dtype(a).kind in "iu" and c.a.get("m_pythondiv") in (None, True):
        # Python's floor division: (a - a mod b) / b divides exactly, so ONNX's truncating Div is right.
        return c.onnx("Div", c.onnx("Sub", a, c.onnx("Mod", a, b, fmod=0)), b)
    return c.onnx("Div", a, b)


@lower("FloorMod", 2)
def floor_mod(c: Ctx, a, b):
    _check_broadcast(c)
    if np_dtype(a).kind in "iu":
        return c.onnx("Mod", a, b, fmod=0)  # integer Mod takes the divisor's sign, as FloorMod
    # ONNX Mod needs fmod=1 for floats; a - floor(a / b) * b has the divisor's sign.
    return c.onnx("Sub", a, c.onnx("Mul", c.onnx("Floor", c.onnx("Div", a, b)), b))


@lower("Mod", 2)
def mod(c: Ctx, a, b):
    _check_broadcast(c)
    return c.onnx("Mod", a, b, fmod=1)  # truncated: the remainder takes the dividend's sign


# opset1 unary layer -> ONNX op of the same meaning.
_UNARY = {
    "Abs": "Abs",
    "Acos": "Acos",
    "Asin": "Asin",
    "Atan": "Atan",
    "Ceiling": "Ceil",
    "Cos": "Cos",
    "Cosh": "Cosh",
    "Erf": "Erf",
    "Exp": "Exp",
    "Floor": "Floor",
    "Log": "Log",
    "LogicalNot": "Not",
    "Negative": "Neg",
    "ReLU": "Relu",
    "Sigmoid": "Sigmoid",
    "Sign": "Sign",
    "Sin": "Sin",
    "Sinh": "Sinh",
    "Sqrt": "Sqrt",
    "Tan": "Tan",
    "Tanh": "Tanh",
}


def _unary(onnx_op: str):
    return lambda c, x: c.onnx(onnx_op, x)


for _op, _onnx in _UNARY.items():
    lower(_op, 1)(_unary(_onnx))


@lower("Elu", 1)
def elu(c: Ctx, x):
    return c.onnx("Elu", x, alpha=c.a["alpha"])


@lower("Clamp", 1)
def clamp(c: Ctx, x):
    dtype = np_dtype(x)
    low, high = float(c.a["min"]), float(c.a["max"])
    if dtype.kind in "iu":
        # Integer data clamps to the integers inside [min, max], limited to the type's range.
        info = np.iinfo(dtype)
        low, high = max(np.ceil(low), info.min), min(np.floor(high), info.max)
    return c.onnx("Clip", x, c.scalar_like(low, x, "min"), c.scalar_like(high, x, "max"))


@lower("PReLU", 2)
def prelu(c: Ctx, x, slope):
    rank = rank_of(x)
    shape = slope.shape
    if shape is not None and len(shape) == 1 and rank >= 2 and x.shape[1] == shape[0] and x.shape[-1] != shape[0]:
        # A channel-length 1-D slope applies along axis 1 (ONNX would broadcast it against the last axis).
        slope = c.unsqueeze(slope, range(1, rank - 1))
    return c.onnx("PRelu", x, slope)


@lower("HardSigmoid", 3)
def hard_sigmoid(c: Ctx, x, alpha, beta):
    return c.onnx("HardSigmoid", x, alpha=const_scalar(alpha, "alpha"), beta=const_scalar(beta, "beta"))


@lower("Selu", 3)
def selu(c: Ctx, x, alpha, lambda_):
    return c.onnx("Selu", x, alpha=const_scalar(alpha, "alpha"), gamma=const_scalar(lambda_, "lambda"))


@lower("Select", 3)
def select(c: Ctx, cond, then, else_):
    _check_broadcast(c)
    if cond.dtype != "bool":
        cond = c.onnx("Cast", cond, to=element_type("bool").onnx)
    return c.onnx("Where", cond, then, else_)


@lower("Convert", 1)
def convert(c: Ctx, x):
    return c.onnx("Cast", x, to=element_type(c.a["destination_type"]).onnx)


@lower("ConvertLike", 2)
def convert_like(c: Ctx, x, like):
    if like.dtype is None:
        raise Refuse(f"the element type of {like.name!r} is unknown")
    return c.onnx("Cast", x, to=element_type(like.dtype).onnx)


@lower("FakeQuantize", 5)
def fake_quantize(c: Ctx, x, input_low, input_high, output_low, output_high):
    _check_broadcast(c)
    steps = c.scalar_like(c.a["levels"] - 1, x, "steps")
    scaled = c.onnx("Mul", c.onnx("Div", c.onnx("Sub", x, input_low), c.onnx("Sub", input_high, input_low)), steps)
    # Rounding half away from zero, as the runtime: sign(v) * floor(|v| + 0.5).
    half = c.scalar_like(0.5, x, "half")
    rounded = c.onnx("Mul", c.onnx("Sign", scaled), c.onnx("Floor", c.onnx("Add", c.onnx("Abs", scaled), half)))
    q = c.onnx("Add", c.onnx("Mul", c.onnx("Div", rounded, steps), c.onnx("Sub", output_high, output_low)), output_low)
    below = c.onnx("LessOrEqual", x, c.onnx("Min", input_low, input_high))
    above = c.onnx("Greater", x, c.onnx("Max", input_low, input_high))
    return c.onnx("Where", below, output_low, c.onnx("Where", above, output_high, q))

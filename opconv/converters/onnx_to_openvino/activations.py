"""ONNX activations and math functions that opset1 lacks, written with opset1 element-wise ops.

Each decomposition is the formula of the ONNX operator's definition; the
ones with an exponential use the overflow-free form (``max(x, 0) +
log(1 + exp(-|x|))`` for softplus) so that large inputs stay finite.
"""

from __future__ import annotations

import math

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const, np_dtype, ov, text_attr


def _float_input(m, name: str = "x"):
    x = m[name]
    if np.dtype(np_dtype(x)).kind != "f":
        raise Refuse(f"{m.root.op} of {x.dtype} is not decomposed (floats only)")
    return x


def _c(b, x, value, name: str = "c"):
    """A scalar constant of ``x``'s element type."""
    return const(b, value, np_dtype(x), name)


def _bin(b, op: str, a, c):
    return ov(b, op, a, c, auto_broadcast="numpy")


def _softplus_of(b, x):
    positive = _bin(b, "Maximum", x, _c(b, x, 0, "zero"))
    tail = ov(b, "Log", _bin(b, "Add", _c(b, x, 1, "one"), ov(b, "Exp", ov(b, "Negative", ov(b, "Abs", x)))))
    return _bin(b, "Add", positive, tail)


@lower("onnx", "openvino", "Softplus", inputs=1, names=("x",))
def _softplus(b, m):
    return _softplus_of(b, _float_input(m))


@lower("onnx", "openvino", "Softsign", inputs=1, names=("x",))
def _softsign(b, m):
    x = _float_input(m)
    return _bin(b, "Divide", x, _bin(b, "Add", _c(b, x, 1, "one"), ov(b, "Abs", x)))


@lower("onnx", "openvino", "Mish", inputs=1, names=("x",))
def _mish(b, m):
    x = _float_input(m)
    return _bin(b, "Multiply", x, ov(b, "Tanh", _softplus_of(b, x)))


@lower("onnx", "openvino", "Gelu", inputs=1, names=("x",))
def _gelu(b, m):
    x = _float_input(m)
    approximate = text_attr(m.root, "approximate", "none")
    if approximate == "tanh":
        cube = _bin(b, "Multiply", _bin(b, "Multiply", x, x), x)
        inner = _bin(b, "Add", x, _bin(b, "Multiply", cube, _c(b, x, 0.044715)))
        core = ov(b, "Tanh", _bin(b, "Multiply", inner, _c(b, x, math.sqrt(2 / math.pi))))
    elif approximate == "none":
        core = ov(b, "Erf", _bin(b, "Multiply", x, _c(b, x, 1 / math.sqrt(2))))
    else:
        raise Refuse(f"Gelu approximate={approximate!r} is not an ONNX mode")
    # x - x * (1 - core) / 2: OpenVINO fuses the textbook forms (0.5 * x * (1 + core) and its
    # rearrangements) into an opset7 Gelu layer when it reads the IR, taking the model out of opset1.
    complement = _bin(b, "Multiply", _bin(b, "Subtract", _c(b, x, 1, "one"), core), _c(b, x, 0.5, "half"))
    return _bin(b, "Subtract", x, _bin(b, "Multiply", x, complement))


def _hard_sigmoid_of(b, x, alpha: float, beta: float):
    return ov(b, "HardSigmoid", x, _c(b, x, alpha, "alpha"), _c(b, x, beta, "beta"))


@lower("onnx", "openvino", "HardSigmoid", inputs=1, names=("x",))
def _hard_sigmoid(b, m):
    x = _float_input(m)
    return _hard_sigmoid_of(b, x, float(attr(m.root, "alpha", 0.2)), float(attr(m.root, "beta", 0.5)))


@lower("onnx", "openvino", "HardSwish", inputs=1, names=("x",))
def _hard_swish(b, m):
    x = _float_input(m)
    return _bin(b, "Multiply", x, _hard_sigmoid_of(b, x, 1 / 6, 0.5))


@lower("onnx", "openvino", "Selu", inputs=1, names=("x",))
def _selu(b, m):
    x = _float_input(m)
    return ov(
        b,
        "Selu",
        x,
        _c(b, x, float(attr(m.root, "alpha", 1.67326319217681884765625)), "alpha"),
        _c(b, x, float(attr(m.root, "gamma", 1.05070102214813232421875)), "lambda"),
    )


@lower("onnx", "openvino", "Celu", inputs=1, names=("x",))
def _celu(b, m):
    x = _float_input(m)
    alpha = float(attr(m.root, "alpha", 1.0))
    expm1 = _bin(b, "Subtract", ov(b, "Exp", _bin(b, "Divide", x, _c(b, x, alpha, "alpha"))), _c(b, x, 1, "one"))
    negative = _bin(b, "Minimum", _bin(b, "Multiply", expm1, _c(b, x, alpha, "alpha")), _c(b, x, 0, "zero"))
    return _bin(b, "Add", _bin(b, "Maximum", x, _c(b, x, 0, "zero")), negative)


@lower("onnx", "openvino", "ThresholdedRelu", inputs=1, names=("x",))
def _thresholded_relu(b, m):
    x = _float_input(m)
    above = _bin(b, "Greater", x, _c(b, x, float(attr(m.root, "alpha", 1.0)), "alpha"))
    return ov(b, "Select", above, x, _c(b, x, 0, "zero"), auto_broadcast="numpy")


@lower("onnx", "openvino", "Shrink", inputs=1, names=("x",))
def _shrink(b, m):
    x = m["x"]
    lambd, bias = float(attr(m.root, "lambd", 0.5)), float(attr(m.root, "bias", 0.0))
    if np.dtype(np_dtype(x)).kind != "f" and (lambd != int(lambd) or bias != int(bias)):
        raise Refuse("Shrink of integers with fractional lambd/bias")
    zero = _c(b, x, 0, "zero")
    low = ov(
        b,
        "Select",
        _bin(b, "Less", x, _c(b, x, -lambd, "low")),
        _bin(b, "Add", x, _c(b, x, bias, "bias")),
        zero,
        auto_broadcast="numpy",
    )
    return ov(
        b,
        "Select",
        _bin(b, "Greater", x, _c(b, x, lambd, "high")),
        _bin(b, "Subtract", x, _c(b, x, bias, "bias")),
        low,
        auto_broadcast="numpy",
    )


@lower("onnx", "openvino", "Swish", inputs=1, names=("x",))
def _swish(b, m):
    x = _float_input(m)
    alpha = float(attr(m.root, "alpha", 1.0))
    scaled = x if alpha == 1.0 else _bin(b, "Multiply", x, _c(b, x, alpha, "alpha"))
    return _bin(b, "Multiply", x, ov(b, "Sigmoid", scaled))


@lower("onnx", "openvino", "SwiGLU", inputs=2, names=("x", "value"))
def _swiglu(b, m):
    """Swish(a) * b: the gate's Swish with the node's alpha, times the value input."""
    return _bin(b, "Multiply", _swish(b, m), m["value"])


@lower("onnx", "openvino", "PRelu", inputs=2, names=("x", "slope"))
def _prelu(b, m):
    x, slope = m["x"], m["slope"]
    zero = _c(b, x, 0, "zero")
    return ov(b, "Select", _bin(b, "Less", x, zero), _bin(b, "Multiply", x, slope), x, auto_broadcast="numpy")


@lower("onnx", "openvino", "IsNaN", inputs=1, names=("x",))
def _is_nan(b, m):
    x = _float_input(m)
    return _bin(b, "NotEqual", x, x)


@lower("onnx", "openvino", "IsInf", inputs=1, names=("x",))
def _is_inf(b, m):
    x = _float_input(m)
    positive, negative = attr(m.root, "detect_positive", 1), attr(m.root, "detect_negative", 1)
    tests = []
    if positive:
        tests.append(_bin(b, "Equal", x, _c(b, x, np.inf, "inf")))
    if negative:
        tests.append(_bin(b, "Equal", x, _c(b, x, -np.inf, "minus_inf")))
    if not tests:
        return _bin(b, "Less", x, x)  # detects nothing: false everywhere, NaN included
    return tests[0] if len(tests) == 1 else _bin(b, "LogicalOr", *tests)


@lower("onnx", "openvino", "Round", inputs=1, names=("x",))
def _round(b, m):
    x = _float_input(m)
    return round_half_even(b, x, np_dtype(x))


def round_half_even(b, x, dtype):
    """Round half to even: floor, then up when the fraction is above 1/2, or exactly 1/2 from an odd floor."""
    c = lambda value, name: const(b, value, dtype, name)  # noqa: E731
    low = ov(b, "Floor", x)
    frac = _bin(b, "Subtract", x, low)
    half = c(0.5, "half")
    odd = _bin(b, "FloorMod", low, c(2, "two"))
    up_if_half = _bin(b, "Add", low, odd)
    at_half = ov(b, "Select", _bin(b, "Equal", frac, half), up_if_half, low, auto_broadcast="numpy")
    return ov(
        b, "Select", _bin(b, "Greater", frac, half), _bin(b, "Add", low, c(1, "one")), at_half, auto_broadcast="numpy"
    )


@lower("onnx", "openvino", "Asinh", inputs=1, names=("x",))
def _asinh(b, m):
    x = _float_input(m)
    root = ov(b, "Sqrt", _bin(b, "Add", _bin(b, "Multiply", x, x), _c(b, x, 1, "one")))
    # asinh is odd: computing it on |x| avoids cancellation for negative x.
    magnitude = ov(b, "Log", _bin(b, "Add", ov(b, "Abs", x), root))
    return _bin(b, "Multiply", ov(b, "Sign", x), magnitude)


@lower("onnx", "openvino", "Acosh", inputs=1, names=("x",))
def _acosh(b, m):
    x = _float_input(m)
    root = ov(b, "Sqrt", _bin(b, "Subtract", _bin(b, "Multiply", x, x), _c(b, x, 1, "one")))
    return ov(b, "Log", _bin(b, "Add", x, root))


@lower("onnx", "openvino", "Atanh", inputs=1, names=("x",))
def _atanh(b, m):
    x = _float_input(m)
    one = _c(b, x, 1, "one")
    ratio = _bin(b, "Divide", _bin(b, "Add", one, x), _bin(b, "Subtract", one, x))
    return _bin(b, "Multiply", ov(b, "Log", ratio), _c(b, x, 0.5, "half"))

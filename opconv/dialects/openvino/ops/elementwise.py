"""Element-wise arithmetic, comparison, logic, unary math and activations (``auto_broadcast`` aware).

The binary ops are declared as a table (op name -> numpy function) and
registered in a loop, so each line states one op's meaning.
"""

from __future__ import annotations

import numpy as np

from ....kernels import elementwise as ew
from ..executor import numpy_dtype, ov_op
from ._common import broadcast


def _divide(a, b, m_pythondiv=True):
    if a.dtype.kind in "iu":
        # Integer division floors with m_pythondiv (Python's //) and truncates otherwise (C's /).
        return ew.int_div(a, b, "floor" if m_pythondiv in (None, True) else "trunc")
    return np.divide(a, b).astype(a.dtype, copy=False)


def _same_type(function):
    """A binary numpy function whose result keeps the first input's element type."""
    return lambda a, b: function(a, b).astype(a.dtype, copy=False)


_BINARY = {
    "Add": _same_type(np.add),
    "Subtract": _same_type(np.subtract),
    "Multiply": _same_type(np.multiply),
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "Power": lambda a, b: ew.power(a, b),
    "SquaredDifference": _same_type(lambda a, b: (a - b) * (a - b)),
    "FloorMod": lambda a, b: ew.mod(a, b, fmod=False),
    "Mod": lambda a, b: ew.mod(a, b, fmod=True),  # the remainder takes the dividend's sign
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
    "LogicalXor": np.logical_xor,
    "Xor": np.logical_xor,
}


def _binary_kernel(function):
    def kernel(ctx, a, b, *, auto_broadcast="numpy"):
        a, b = broadcast(auto_broadcast, a, b)
        return np.asarray(function(a, b))

    return kernel


for _name, _function in _BINARY.items():
    ov_op(_name)(_binary_kernel(_function))


@ov_op("Divide")
def divide(ctx, a, b, *, auto_broadcast="numpy", m_pythondiv=True):
    a, b = broadcast(auto_broadcast, a, b)
    return _divide(a, b, m_pythondiv)


def _float(function):
    """A unary float function that keeps the input's element type."""
    return lambda x: np.asarray(function(x)).astype(x.dtype, copy=False)


_UNARY = {
    "Abs": np.abs,
    "Negative": np.negative,
    "Sign": lambda x: np.sign(x).astype(x.dtype),
    "Ceiling": np.ceil,
    "Floor": np.floor,
    "Sqrt": _float(np.sqrt),
    "Exp": _float(np.exp),
    "Log": _float(np.log),
    "Sin": _float(np.sin),
    "Cos": _float(np.cos),
    "Tan": _float(np.tan),
    "Asin": _float(np.arcsin),
    "Acos": _float(np.arccos),
    "Atan": _float(np.arctan),
    "Sinh": _float(np.sinh),
    "Cosh": _float(np.cosh),
    "Tanh": _float(np.tanh),
    "Erf": ew.erf,
    "Sigmoid": ew.sigmoid,
    "ReLU": ew.relu,
    "LogicalNot": np.logical_not,
}


def _unary_kernel(function):
    def kernel(ctx, x):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # NaN/inf follow IEEE, as the runtime
            return np.asarray(function(np.asarray(x)))

    return kernel


for _name, _function in _UNARY.items():
    ov_op(_name)(_unary_kernel(_function))


@ov_op("Elu")
def elu(ctx, x, *, alpha):
    return ew.elu(x, alpha)


@ov_op("Clamp")
def clamp(ctx, x, *, min, max):
    if x.dtype.kind in "iu":
        # Integer data clamps to the integers inside [min, max].
        min, max = np.ceil(min), np.floor(max)
    return ew.clip(x, min, max)


@ov_op("PReLU")
def prelu(ctx, x, slope):
    slope = np.asarray(slope)
    if slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1] and slope.shape[0] != x.shape[-1]:
        # A 1-D slope of channel length applies per channel (axis 1), not to the last axis.
        slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    return np.where(x < 0, x * slope, x).astype(x.dtype, copy=False)


@ov_op("HardSigmoid")
def hard_sigmoid(ctx, x, alpha, beta):
    return ew.hard_sigmoid(x, np.asarray(alpha).item(), np.asarray(beta).item())


@ov_op("Selu")
def selu(ctx, x, alpha, lambda_):
    return ew.selu(x, np.asarray(alpha).item(), np.asarray(lambda_).item())


@ov_op("Select")
def select(ctx, cond, then, else_, *, auto_broadcast="numpy"):
    cond, then, else_ = broadcast(auto_broadcast, cond, then, else_)
    return np.where(cond.astype(bool), then, else_)


@ov_op("Convert")
def convert(ctx, x, *, destination_type):
    return ew.cast(x, numpy_dtype(destination_type))


@ov_op("ConvertLike")
def convert_like(ctx, x, like):
    return ew.cast(x, np.asarray(like).dtype)


@ov_op("FakeQuantize")
def fake_quantize(ctx, x, input_low, input_high, output_low, output_high, *, levels, auto_broadcast="numpy"):
    x, il, ih, ol, oh = broadcast(auto_broadcast, x, input_low, input_high, output_low, output_high)
    steps = levels - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        q = ew.round_half_away((x - il) / (ih - il) * steps) / steps * (oh - ol) + ol
    y = np.where(x <= np.minimum(il, ih), ol, np.where(x > np.maximum(il, ih), oh, q))
    return y.astype(x.dtype, copy=False)

"""Activations and the fused gated units: Relu, Relu6, LeakyRelu, PRelu, Elu, Sigmoid, HardSigmoid,
HardSwish, Silu, Swish, Mish, Softplus, Gelu, Glu, GeGlu, Gtu.

Formulas are the dialect specification's (section 3 of
``hlo-operation-semantics``); the numerics are :mod:`opconv.kernels.elementwise`.
The gated units split their input into two equal halves ``a, b`` along ``dim``
and combine them element-wise: ``Glu = a * sigmoid(b)``, ``GeGlu = a *
gelu(b)``, ``Gtu = tanh(a) * sigmoid(b)``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise as E
from ....kernels._common import downcast, normalize_axis, upcast
from ..executor import hlo_op


@hlo_op("Relu")
def relu(ctx, x):
    return E.relu(x)


@hlo_op("Relu6")
def relu6(ctx, x):
    return E.clip(x, np.asarray(0, x.dtype), np.asarray(6, x.dtype))


@hlo_op("LeakyRelu")
def leaky_relu(ctx, x, *, alpha):
    return E.leaky_relu(x, alpha)


@hlo_op("PRelu")
def prelu(ctx, x, slope):
    xc, sc = upcast(x), upcast(slope)
    return downcast(np.where(xc >= 0, xc, xc * sc), x.dtype)


@hlo_op("Elu")
def elu(ctx, x, *, alpha):
    return E.elu(x, alpha)


@hlo_op("Sigmoid")
def sigmoid(ctx, x):
    return E.sigmoid(x)


@hlo_op("HardSigmoid")
def hard_sigmoid(ctx, x, *, slope, offset):
    return E.hard_sigmoid(x, slope, offset)


@hlo_op("HardSwish")
def hard_swish(ctx, x):
    return E.hard_swish(x)


@hlo_op("Silu")
@hlo_op("Swish")  # the same x * sigmoid(x) under the name each source dialect uses
def swish(ctx, x):
    return E.swish(x)


@hlo_op("Mish")
def mish(ctx, x):
    return E.mish(x)


@hlo_op("Softplus")
def softplus(ctx, x, *, beta, threshold):
    # (1 / beta) * log(1 + exp(beta * x)), and x itself where beta * x exceeds the threshold.
    xc = upcast(x)
    scaled = xc * np.asarray(beta, xc.dtype)
    smooth = E.softplus(scaled) / np.asarray(beta, xc.dtype)
    return downcast(np.where(scaled > threshold, xc, smooth), x.dtype)


def _gelu_mode(approximate: bool) -> str:
    return "tanh" if approximate else "none"


@hlo_op("Gelu")
def gelu(ctx, x, *, approximate):
    return E.gelu(x, _gelu_mode(approximate))


def _halves(x: np.ndarray, dim: int):
    axis = normalize_axis(dim, x.ndim)
    if x.shape[axis] % 2:
        raise ExecutionError(f"dim {dim} has odd size {x.shape[axis]}; it must split into two equal halves")
    return np.split(upcast(x), 2, axis=axis)


@hlo_op("Glu")
def glu(ctx, x, *, dim):
    a, b = _halves(x, dim)
    return downcast(a * E.sigmoid(b), x.dtype)


@hlo_op("GeGlu")
def geglu(ctx, x, *, approximate, dim):
    a, b = _halves(x, dim)
    return downcast(a * E.gelu(b, _gelu_mode(approximate)), x.dtype)


@hlo_op("Gtu")
def gtu(ctx, x, *, dim):
    a, b = _halves(x, dim)
    return downcast(np.tanh(a) * E.sigmoid(b), x.dtype)

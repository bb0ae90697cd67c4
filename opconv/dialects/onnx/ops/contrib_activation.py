"""ONNX Runtime's activations (com.microsoft): Gelu, BiasGelu, FastGelu, QuickGelu, and the activation
table its fused ops (FusedGemm, FusedConv) name.

Gelu and BiasGelu are the exact (erf) GELU, of ``X`` and of ``A + B``; FastGelu is the tanh
approximation of ``X (+ bias)``; QuickGelu is ``x * sigmoid(alpha * x)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise as E
from ....kernels._common import downcast, upcast
from ..executor import onnx_op

MS = "com.microsoft"


def _biased(x, bias):
    x = np.asarray(x)
    return x if bias is None else (x + np.asarray(bias)).astype(x.dtype, copy=False)


@onnx_op("Gelu", since=1, domain=MS)
def gelu(ctx, x):
    return E.gelu(x)


@onnx_op("BiasGelu", since=1, domain=MS)
def bias_gelu(ctx, a, b):
    return E.gelu(_biased(a, b))


@onnx_op("FastGelu", since=1, domain=MS)
def fast_gelu(ctx, x, bias=None):
    return E.gelu(_biased(x, bias), approximate="tanh")


@onnx_op("QuickGelu", since=1, domain=MS)
def quick_gelu(ctx, x, *, alpha):
    x = np.asarray(x)
    xc = upcast(x)
    return downcast(xc * E.sigmoid(xc * xc.dtype.type(alpha)), x.dtype)


# ---------------------------------------------------------------- fused activations

#: ORT's fusable activations: name -> (function of x and its parameters, default parameters)
FUSED_ACTIVATIONS: dict[str, tuple[Callable, tuple]] = {
    "Relu": (lambda x: E.relu(x), ()),
    "Tanh": (np.tanh, ()),
    "Sigmoid": (E.sigmoid, ()),
    "LeakyRelu": (E.leaky_relu, (0.01,)),
    "HardSigmoid": (E.hard_sigmoid, (0.2, 0.5)),
    "Clip": (E.clip, (float("-inf"), float("inf"))),
    "Elu": (E.elu, (1.0,)),
}


def fused_activation(name: str | None, params: Sequence[float] = ()) -> Callable[[np.ndarray], np.ndarray]:
    """The activation a fused op's ``activation`` attribute names, with its parameters bound (identity for None)."""
    if not name:
        return lambda x: x
    try:
        function, defaults = FUSED_ACTIVATIONS[name]
    except KeyError:
        raise ExecutionError(
            f"unknown fused activation {name!r}; expected one of {sorted(FUSED_ACTIVATIONS)}"
        ) from None
    bound = tuple(params[: len(defaults)]) + defaults[len(params) :]
    return lambda x: function(x, *bound)

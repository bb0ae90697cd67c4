"""Activations: Relu and its relatives, Sigmoid/Tanh families, Gelu, Swish, SwiGLU, and Softmax/LogSoftmax/Hardmax.

The numerics are :mod:`opconv.kernels.elementwise` and :mod:`opconv.kernels.norm`; this module maps
ONNX's attributes onto them.  Version history that matters:

* opset 1 carried the legacy ``consumed_inputs`` attribute (accepted, ignored); Selu-1 had other
  defaults for ``alpha``/``gamma`` (the schema's defaults are applied before the kernel runs);
* PRelu-1/6 shared a one-value slope, or applied a 1-D slope per channel (dim 1); from PRelu-7 the
  slope broadcasts numpy-style (unidirectionally) to ``X``;
* Softmax, LogSoftmax and Hardmax before opset 13 flatten the input to 2-D at ``axis`` (default 1)
  and normalize each row; from opset 13 they work along the one ``axis`` (default -1).

Every other later version only widened the type set and shares its predecessor's function.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise, norm
from ....kernels._common import computes_natively, downcast, upcast
from ..executor import onnx_op

# ---------------------------------------------------------------- parameterless


def _activation(function):
    def kernel(ctx, x, *, consumed_inputs=None):  # consumed_inputs: legacy (opset 1), ignored
        return function(x)

    kernel.__name__ = function.__name__
    return kernel


#: op -> (kernel function, every schema version)
_PLAIN = {
    "Sigmoid": (elementwise.sigmoid, [1, 6, 13]),
    "HardSwish": (elementwise.hard_swish, [14, 22]),
    "Softplus": (elementwise.softplus, [1, 22]),
    "Softsign": (elementwise.softsign, [1, 22]),
    "Mish": (elementwise.mish, [18, 22]),
}

for _op, (_function, _versions) in _PLAIN.items():
    onnx_op(_op, since=_versions)(_activation(_function))


@onnx_op("Relu", since=[1, 6, 13, 14])
def relu_1(ctx, x, *, consumed_inputs=None):
    if ctx.owns(0) and computes_natively(x.dtype):
        return elementwise.relu(x, out=x)  # the input dies here: reuse its buffer
    return elementwise.relu(x)


@onnx_op("Tanh", since=[1, 6, 13])
def tanh_1(ctx, x, *, consumed_inputs=None):
    x = np.asarray(x)
    return downcast(np.tanh(upcast(x)), x.dtype)


# ---------------------------------------------------------------- with parameters


@onnx_op("LeakyRelu", since=[1, 6, 16])
def leaky_relu_1(ctx, x, *, alpha, consumed_inputs=None):
    return elementwise.leaky_relu(x, alpha)


@onnx_op("Elu", since=[1, 6, 22])
def elu_1(ctx, x, *, alpha, consumed_inputs=None):
    return elementwise.elu(x, alpha)


@onnx_op("Selu", since=[1, 6, 22])
def selu_1(ctx, x, *, alpha, gamma, consumed_inputs=None):
    return elementwise.selu(x, alpha, gamma)


@onnx_op("Celu", since=[12, 28])
def celu_12(ctx, x, *, alpha):
    return elementwise.celu(x, alpha)


@onnx_op("HardSigmoid", since=[1, 6, 22])
def hard_sigmoid_1(ctx, x, *, alpha, beta, consumed_inputs=None):
    return elementwise.hard_sigmoid(x, alpha, beta)


@onnx_op("ThresholdedRelu", since=[10, 22])
def thresholded_relu_10(ctx, x, *, alpha):
    return elementwise.thresholded_relu(x, alpha)


@onnx_op("Shrink", since=9)
def shrink_9(ctx, x, *, bias, lambd):
    return elementwise.shrink(x, lambd, bias)


@onnx_op("Gelu", since=20)
def gelu_20(ctx, x, *, approximate):
    return elementwise.gelu(x, approximate)


@onnx_op("Swish", since=24)
def swish_24(ctx, x, *, alpha):
    return elementwise.swish(x, alpha)


@onnx_op("SwiGLU", since=28)
def swiglu_28(ctx, a, b, *, alpha):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ExecutionError(
            f"SwiGLU's gate and value must have one shape (no broadcasting), got {list(a.shape)} and {list(b.shape)}"
        )
    # Gate and product in float32 for narrow floats, rounded once at the end.
    return downcast(elementwise.swish(upcast(a), alpha) * upcast(b), a.dtype)


# ---------------------------------------------------------------- PRelu


def _per_channel_slope(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """PRelu-1/6: a 1-D slope of C values applies per channel (dim 1); one value is shared."""
    if slope.ndim == 1 and slope.size > 1 and x.ndim >= 2 and slope.size == x.shape[1]:
        return slope.reshape([-1] + [1] * (x.ndim - 2))
    return slope


@onnx_op("PRelu", since=[1, 6])
def prelu_1(ctx, x, slope, *, consumed_inputs=None):
    x = np.asarray(x)
    return elementwise.leaky_relu(x, alpha=upcast(_per_channel_slope(x, np.asarray(slope))))


@onnx_op("PRelu", since=[7, 9, 16])
def prelu_7(ctx, x, slope):
    x, slope = np.asarray(x), np.asarray(slope)
    if np.broadcast_shapes(x.shape, slope.shape) != x.shape:
        raise ExecutionError(f"PRelu slope {list(slope.shape)} does not broadcast to X {list(x.shape)}")
    return elementwise.leaky_relu(x, alpha=upcast(slope))


# ---------------------------------------------------------------- softmax family


@onnx_op("Softmax", since=[1, 11])
def softmax_1(ctx, x, *, axis):
    return norm.softmax(x, axis, coerce_2d=True)


@onnx_op("Softmax", since=13)
def softmax_13(ctx, x, *, axis):
    return norm.softmax(x, axis)


@onnx_op("LogSoftmax", since=[1, 11])
def log_softmax_1(ctx, x, *, axis):
    return norm.log_softmax(x, axis, coerce_2d=True)


@onnx_op("LogSoftmax", since=13)
def log_softmax_13(ctx, x, *, axis):
    return norm.log_softmax(x, axis)


@onnx_op("Hardmax", since=[1, 11])
def hardmax_1(ctx, x, *, axis):
    return norm.hardmax(x, axis, coerce_2d=True)


@onnx_op("Hardmax", since=13)
def hardmax_13(ctx, x, *, axis):
    return norm.hardmax(x, axis)

"""Random generators: RandomNormal(Like), RandomUniform(Like), Bernoulli, Multinomial.

Every draw comes from ``ctx.rng(seed)``: with the node's ``seed`` attribute the
stream is fixed by that seed, without one it is fixed by the run's seed and the
node's name, so a model run twice gives the same outputs.  The streams are
numpy's, not those of any other runtime: only the distribution, shape and
element type can match another implementation, never the values.

Samples are drawn in float64 and cast to the requested element type (opset 22
only added bfloat16 to the allowed types, so each op has one kernel).
"""

from __future__ import annotations

import numpy as np

from .... import budget
from ....errors import ExecutionError
from ....kernels._common import is_float_dtype
from ..executor import onnx_dtype, onnx_op


def _float_dtype(code: int) -> np.dtype:
    dtype = np.dtype(onnx_dtype(code))
    if not is_float_dtype(dtype):
        raise ExecutionError(f"dtype must be a float type, got {dtype}")
    return dtype


def _like_dtype(x: np.ndarray, code: int | None) -> np.dtype:
    # The *Like ops default to the input's element type; a non-float input then needs an explicit dtype.
    return _float_dtype(code) if code is not None else np.dtype(x.dtype)


def _shape(shape) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ExecutionError(f"shape {list(shape)} has negative dimensions")
    budget.check(shape, 8, "a random tensor")  # drawn as float64
    return shape


@onnx_op("RandomNormal", since=[1, 22], deterministic=False)
def random_normal_1(ctx, *, dtype, mean, scale, seed, shape):
    values = ctx.rng(seed).normal(mean, scale, _shape(shape))
    return values.astype(_float_dtype(dtype))


@onnx_op("RandomUniform", since=[1, 22], deterministic=False)
def random_uniform_1(ctx, *, dtype, high, low, seed, shape):
    values = ctx.rng(seed).uniform(low, high, _shape(shape))
    return values.astype(_float_dtype(dtype))


@onnx_op("RandomNormalLike", since=[1, 22], deterministic=False)
def random_normal_like_1(ctx, input, *, dtype, mean, scale, seed):
    x = np.asarray(input)
    return ctx.rng(seed).normal(mean, scale, x.shape).astype(_like_dtype(x, dtype))


@onnx_op("RandomUniformLike", since=[1, 22], deterministic=False)
def random_uniform_like_1(ctx, input, *, dtype, high, low, seed):
    x = np.asarray(input)
    return ctx.rng(seed).uniform(low, high, x.shape).astype(_like_dtype(x, dtype))


@onnx_op("Bernoulli", since=[15, 22], deterministic=False)
def bernoulli_15(ctx, input, *, dtype, seed):
    """1 with probability ``input[i]``, else 0; output in ``dtype`` (any numeric or bool), default the input's."""
    p = np.asarray(input)
    draws = ctx.rng(seed).random(p.shape) < p
    return draws.astype(p.dtype if dtype is None else onnx_dtype(dtype))


@onnx_op("Multinomial", since=[7, 22], deterministic=False)
def multinomial_7(ctx, input, *, dtype, sample_size, seed):
    """``sample_size`` class indices per row of ``input`` ([batch, classes] unnormalized log-probabilities)."""
    logits = np.asarray(input, dtype=np.float64)
    if logits.ndim != 2:
        raise ExecutionError(f"Multinomial takes a [batch, classes] tensor, got shape {list(logits.shape)}")
    out_dtype = np.dtype(onnx_dtype(dtype))
    if out_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ExecutionError(f"Multinomial's dtype must be int32 or int64, got {out_dtype}")
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    u = ctx.rng(seed).random((logits.shape[0], sample_size))
    # Inverse-CDF sampling: the class is the number of cumulative probabilities below the draw.
    classes = (u[:, :, None] >= cdf[:, None, :]).sum(axis=-1)
    return np.minimum(classes, logits.shape[1] - 1).astype(out_dtype)

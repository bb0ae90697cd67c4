"""Random ops: RngNormal, RngUniform, Dropout.

Draws come from ``ctx.rng(seed)``: the ``seed`` attribute fixes the stream
(RngNormal/RngUniform default it to 1), and Dropout without a seed uses the
run's seed and the node's name, so a model run twice gives the same values.
The streams are numpy's: another runtime can match only the distribution.
RngUniform draws integers in ``[a, b)`` for integer types.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels._common import downcast, is_int_dtype, upcast
from ..executor import hlo_op


def _shape(shape) -> tuple[int, ...]:
    shape = tuple(int(d) for d in np.ravel(shape))
    if any(d < 0 for d in shape):
        raise ExecutionError(f"shape {list(shape)} has negative dimensions")
    return shape


@hlo_op("RngNormal", deterministic=False)
def rng_normal(ctx, mu, sigma, shape, *, seed):
    mu = np.asarray(mu)
    values = ctx.rng(seed).normal(mu.item(), np.asarray(sigma).item(), _shape(shape))
    return values.astype(mu.dtype)


@hlo_op("RngUniform", deterministic=False)
def rng_uniform(ctx, a, b, shape, *, seed):
    a = np.asarray(a)
    rng = ctx.rng(seed)
    if is_int_dtype(a.dtype):
        low, high = int(a.item()), int(np.asarray(b).item())
        if high <= low:
            raise ExecutionError(f"RngUniform needs a < b, got [{low}, {high})")
        return rng.integers(low, high, _shape(shape)).astype(a.dtype)
    return rng.uniform(a.item(), np.asarray(b).item(), _shape(shape)).astype(a.dtype)


@hlo_op("Dropout", deterministic=False)
def dropout(ctx, data, *, ratio, training_mode, seed, noise_shape):
    data = np.asarray(data)
    if not 0 <= ratio <= 1:
        raise ExecutionError(f"ratio must be in [0, 1], got {ratio}")
    if not training_mode or ratio == 0:
        return data, np.ones(data.shape, dtype=bool)
    mask_shape = data.shape if noise_shape is None else _shape(noise_shape)
    keep = ctx.rng(seed).random(mask_shape) >= ratio
    keep = np.broadcast_to(keep, data.shape)
    scale = 0.0 if ratio == 1 else 1.0 / (1.0 - ratio)
    return downcast(np.where(keep, upcast(data) * scale, 0), data.dtype), keep.copy()

"""Normalizations and Dropout: BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, RMSNormalization, LRN, MeanVarianceNormalization, LpNormalization, Dropout.

Numerics in :mod:`opconv.kernels.norm`.  Version notes:

* BatchNormalization: up to version 9, training versus inference is told by
  the outputs (the running and saved statistics are only produced in
  training), and versions 1/6 also by ``is_test``; version 14 made it the
  ``training_mode`` attribute and dropped the saved statistics.  Up to
  version 7, ``spatial=0`` normalizes every activation on its own (the
  parameters have shape ``(C, D1, ...)``).
* GroupNormalization-18 has one scale/bias per group, -21 one per channel.
* Dropout is an identity up to version 10 unless versions 1/6 say
  ``is_test=0``; from version 12 the ``training_mode`` input decides and the
  ``ratio`` is an input.  The mask is of the data type before version 10,
  bool after.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import norm as N
from ..executor import onnx_dtype, onnx_op

# ---------------------------------------------------------------- BatchNormalization


def _batch_norm(
    ctx, x, scale, b, mean, var, epsilon, momentum, training: bool, spatial: int = 1, saved_stats: bool = True
):
    """Shared body of every BatchNormalization version; returns as many values as the node has outputs."""
    shape = x.shape
    if not spatial:
        # Per-activation statistics: each (channel, position) is its own channel of the 2-D view.
        x, scale, b, mean, var = (np.reshape(t, (shape[0], -1) if t is x else (-1,)) for t in (x, scale, b, mean, var))
    if not training:
        y = N.batch_norm(x, scale, b, mean, var, epsilon, overwrite_input=ctx.owns(0))
        outputs = (y,)
    else:
        y, running_mean, running_var, batch_mean, batch_var = N.batch_norm_training(
            x, scale, b, mean, var, epsilon, momentum
        )
        outputs = (y, running_mean, running_var) + ((batch_mean, batch_var) if saved_stats else ())
    outputs = (outputs[0].reshape(shape),) + outputs[1:]
    if ctx.num_outputs == 1:
        return outputs[0]
    return outputs + (None,) * (ctx.num_outputs - len(outputs))


def _has_statistics_outputs(ctx) -> bool:
    return any(ctx.output_used(i) for i in range(1, ctx.num_outputs))


@onnx_op("BatchNormalization", since=1)
def batch_normalization_1(ctx, x, scale, b, mean, var, *, consumed_inputs, epsilon, is_test, momentum, spatial):
    training = not is_test and _has_statistics_outputs(ctx)
    return _batch_norm(ctx, x, scale, b, mean, var, epsilon, momentum, training, spatial)


@onnx_op("BatchNormalization", since=6)
def batch_normalization_6(ctx, x, scale, b, mean, var, *, epsilon, is_test, momentum, spatial):
    training = not is_test and _has_statistics_outputs(ctx)
    return _batch_norm(ctx, x, scale, b, mean, var, epsilon, momentum, training, spatial)


@onnx_op("BatchNormalization", since=7)
def batch_normalization_7(ctx, x, scale, b, mean, var, *, epsilon, momentum, spatial):
    return _batch_norm(ctx, x, scale, b, mean, var, epsilon, momentum, _has_statistics_outputs(ctx), spatial)


@onnx_op("BatchNormalization", since=9)
def batch_normalization_9(ctx, x, scale, b, mean, var, *, epsilon, momentum):
    return _batch_norm(ctx, x, scale, b, mean, var, epsilon, momentum, _has_statistics_outputs(ctx))


@onnx_op("BatchNormalization", since=[14, 15])
def batch_normalization_14(ctx, x, scale, b, input_mean, input_var, *, epsilon, momentum, training_mode):
    return _batch_norm(
        ctx, x, scale, b, input_mean, input_var, epsilon, momentum, bool(training_mode), saved_stats=False
    )


# ---------------------------------------------------------------- other normalizations


@onnx_op("InstanceNormalization", since=[1, 6, 22])
def instance_normalization(ctx, x, scale, b, *, epsilon, consumed_inputs=None):
    return N.instance_norm(x, scale, b, epsilon)


@onnx_op("LayerNormalization", since=17)
def layer_normalization_17(ctx, x, scale, b=None, *, axis, epsilon, stash_type):
    y, mean, inv_std = N.layer_norm(x, scale, b, axis, epsilon, onnx_dtype(stash_type))
    return (y, mean, inv_std)[: ctx.num_outputs] if ctx.num_outputs > 1 else y


@onnx_op("GroupNormalization", since=18)
def group_normalization_18(ctx, x, scale, bias, *, epsilon, num_groups):
    # One scale/bias per group: every channel of a group shares it.
    channels = x.shape[1]
    if np.size(scale) != num_groups or np.size(bias) != num_groups or channels % num_groups:
        raise ExecutionError(
            f"GroupNormalization-18 needs {num_groups} scale/bias values and channels "
            f"({channels}) divisible by num_groups"
        )
    per_channel = [np.repeat(np.reshape(t, -1), channels // num_groups) for t in (scale, bias)]
    return N.group_norm(x, *per_channel, num_groups, epsilon)


@onnx_op("GroupNormalization", since=21)
def group_normalization_21(ctx, x, scale, bias, *, epsilon, num_groups, stash_type):
    channels = x.shape[1]
    if np.size(scale) != channels or np.size(bias) != channels:
        raise ExecutionError(f"GroupNormalization-21 needs one scale and bias per channel ({channels})")
    # Computed in the stash type, then cast back (as the op's function body does).
    y = N.group_norm(x.astype(onnx_dtype(stash_type)), scale, bias, num_groups, epsilon)
    return y.astype(x.dtype)


@onnx_op("RMSNormalization", since=23)
def rms_normalization_23(ctx, x, scale, *, axis, epsilon, stash_type):
    return N.rms_norm(x, scale, axis, epsilon, onnx_dtype(stash_type))


@onnx_op("LRN", since=[1, 13])
def lrn(ctx, x, *, alpha, beta, bias, size):
    return N.lrn(x, size, alpha, beta, bias)


@onnx_op("MeanVarianceNormalization", since=[9, 13])
def mean_variance_normalization(ctx, x, *, axes):
    return N.mean_variance_normalization(x, axes)


@onnx_op("LpNormalization", since=[1, 22])
def lp_normalization(ctx, x, *, axis, p):
    return N.lp_normalization(x, axis, p)


# ---------------------------------------------------------------- Dropout


def _dropout(ctx, x, ratio: float, training: bool, seed, mask_dtype):
    if not 0 <= ratio < 1:
        raise ExecutionError(f"dropout ratio must be in [0, 1), got {ratio}")
    if not training or ratio == 0:
        y, keep = x, np.ones(x.shape, dtype=bool)
    else:
        # With a seed, numpy's classic generator seeded with it (so a seed reproduces the masks
        # other numpy-based implementations draw); without one, the run's deterministic generator.
        draws = (
            np.random.RandomState(int(seed)).uniform(0, 1, x.shape)
            if seed is not None
            else ctx.rng().uniform(0, 1, x.shape)
        )
        keep = draws >= ratio
        y = (x * keep / np.asarray(1 - ratio, dtype=x.dtype)).astype(x.dtype)
    return (y, keep.astype(mask_dtype or x.dtype)) if ctx.num_outputs > 1 else y


@onnx_op("Dropout", since=1, deterministic=False)
def dropout_1(ctx, x, *, consumed_inputs, is_test, ratio):
    return _dropout(ctx, x, ratio, not is_test, None, None)


@onnx_op("Dropout", since=6, deterministic=False)
def dropout_6(ctx, x, *, is_test, ratio):
    return _dropout(ctx, x, ratio, not is_test, None, None)


@onnx_op("Dropout", since=7, deterministic=False)
def dropout_7(ctx, x, *, ratio):
    return _dropout(ctx, x, ratio, False, None, None)


@onnx_op("Dropout", since=10, deterministic=False)
def dropout_10(ctx, x, *, ratio):
    return _dropout(ctx, x, ratio, False, None, bool)


@onnx_op("Dropout", since=[12, 13, 22], deterministic=False)
def dropout_12(ctx, x, ratio=None, training_mode=None, *, seed):
    ratio = 0.5 if ratio is None else float(np.asarray(ratio))
    training = training_mode is not None and bool(np.asarray(training_mode))
    return _dropout(ctx, x, ratio, training, seed, bool)

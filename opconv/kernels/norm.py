"""Normalization kernels: batch / instance / layer / group / RMS norm, LRN, MVN,
Lp normalization, the softmax family and the NLL loss built on it.

Conventions
-----------
Inputs are channels-first ``(N, C, *spatial)`` where a channel dim matters;
per-channel parameters are 1-D arrays of length ``C``.  Variances are
population variances (divide by the count, not count - 1).  ``epsilon`` is
added to the variance inside the square root unless a function says
otherwise (:func:`mean_variance_normalization` lets the caller choose, as
OpenVINO ``MVN``'s ``eps_mode`` does).

* :func:`batch_norm_training` returns the running statistics updated as
  ``running * momentum + batch * (1 - momentum)`` (ONNX ``BatchNormalization``
  with ``training_mode``), plus the batch mean and variance.
* :func:`layer_norm` normalizes over dims ``axis..rank-1`` and also returns
  the mean and ``1 / sqrt(var + eps)`` it used, in ``stash_dtype``.
* :func:`lrn` sums squares over a window of ``size`` along each of ``axes``
  (``floor((size - 1) / 2)`` before, ``ceil((size - 1) / 2)`` after) and
  divides ``alpha`` by ``size ** len(axes)``: ONNX ``LRN`` is ``axes=(1,)``.
  :func:`lrn_symmetric` is OpenVINO ``LRN``: the same but with
  ``floor((size - 1) / 2)`` elements on *both* sides (an even ``size`` sums
  ``size - 1`` elements; the divisor stays ``size ** len(axes)``).
* :func:`mean_variance_normalization` with ONNX's defaults is ONNX ``MVN``;
  OpenVINO ``MVN-1``'s ``across_channels`` is ``axes=(1, 2, ...)`` versus
  ``(2, ...)``.
* ``softmax`` / ``log_softmax`` / ``hardmax`` work on one axis, or with
  ``coerce_2d`` (opset < 13) on the 2-D view ``(prod(shape[:axis]), -1)``.
* :func:`nll_loss` is the negative log-likelihood loss with class weights,
  an ignored class and none/sum/mean reduction (ONNX's two loss ops).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import ExecutionError
from ._common import downcast, normalize_axes, normalize_axis, pad_or_crop, upcast


def _channel_shape(param, ndim: int, axis: int = 1) -> np.ndarray:
    """Reshape a per-channel vector to broadcast against a rank-``ndim`` array."""
    return upcast(param).reshape([-1 if d == axis else 1 for d in range(ndim)])


def batch_norm(
    x, scale, bias, mean, var, epsilon: float = 1e-5, axis: int = 1, *, overwrite_input: bool = False
) -> np.ndarray:
    """Inference batch normalization with given statistics, channels on ``axis``.

    The per-channel arithmetic is folded first, ``y = x * a + b`` with
    ``a = scale / sqrt(var + eps)`` and ``b = bias - mean * a``, so the tensor
    itself is touched by one multiply and one in-place add.  With
    ``overwrite_input`` the result is written into ``x`` when its dtype allows.
    """
    x = np.asarray(x)
    xc = upcast(x)
    axis = normalize_axis(axis, x.ndim)
    a = upcast(scale) / np.sqrt(upcast(var) + np.asarray(epsilon, dtype=upcast(var).dtype))
    b = upcast(bias) - upcast(mean) * a
    out = x if overwrite_input and xc is x and x.flags.writeable else None
    y = np.multiply(xc, _channel_shape(a.astype(xc.dtype, copy=False), x.ndim, axis), out=out)
    y += _channel_shape(b.astype(xc.dtype, copy=False), x.ndim, axis)
    return downcast(y, x.dtype)


def batch_norm_training(x, scale, bias, running_mean, running_var, epsilon: float = 1e-5, momentum: float = 0.9):
    """Training batch normalization: normalize with the batch statistics.

    Returns ``(y, new_running_mean, new_running_var, batch_mean, batch_var)``.
    """
    x = np.asarray(x)
    xc = upcast(x)
    reduce_axes = tuple(d for d in range(x.ndim) if d != 1)
    batch_mean = xc.mean(axis=reduce_axes)
    batch_var = xc.var(axis=reduce_axes)
    y = batch_norm(x, scale, bias, batch_mean, batch_var, epsilon)
    new_mean = upcast(running_mean) * momentum + batch_mean * (1 - momentum)
    new_var = upcast(running_var) * momentum + batch_var * (1 - momentum)
    dtype = np.asarray(running_mean).dtype
    return (
        y,
        downcast(new_mean, dtype),
        downcast(new_var, dtype),
        downcast(batch_mean, dtype),
        downcast(batch_var, dtype),
    )


def instance_norm(x, scale, bias, epsilon: float = 1e-5) -> np.ndarray:
    """Normalize each (image, channel) over its spatial dims, then scale/shift per channel."""
    x = np.asarray(x)
    xc = upcast(x)
    axes = tuple(range(2, x.ndim))
    y = (xc - xc.mean(axis=axes, keepdims=True)) / np.sqrt(xc.var(axis=axes, keepdims=True) + epsilon)
    return downcast(y * _channel_shape(scale, x.ndim) + _channel_shape(bias, x.ndim), x.dtype)


def layer_norm(x, scale, bias=None, axis: int = -1, epsilon: float = 1e-5, stash_dtype=np.float32):
    """Normalize over dims ``axis..rank-1``; ``scale``/``bias`` broadcast to those dims.

    Returns ``(y, mean, inv_std_dev)``; the statistics keep the normalized dims as 1s.
    """
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    axes = tuple(range(axis, x.ndim))
    stash = np.dtype(stash_dtype)
    xs = x.astype(np.result_type(stash, upcast(x).dtype), copy=False)
    # The same operations as mean() and (xs - mean) ** 2, without their per-call overhead or extra buffers.
    count = math.prod(x.shape[axis:])
    mean = np.add.reduce(xs, axis=axes, keepdims=True)
    mean /= count
    y = xs - mean
    variance = np.add.reduce(np.square(y), axis=axes, keepdims=True)
    variance /= count
    variance += epsilon
    inv_std = np.reciprocal(np.sqrt(variance, out=variance), out=variance)
    y *= inv_std
    y *= upcast(scale)
    if bias is not None:
        y += upcast(bias)
    return downcast(y, x.dtype), downcast(mean, stash), downcast(inv_std, stash)


def rms_norm(x, scale, axis: int = -1, epsilon: float = 1e-5, stash_dtype=np.float32) -> np.ndarray:
    """``x / sqrt(mean(x ** 2) + eps) * scale`` over dims ``axis..rank-1``, computed in ``stash_dtype``."""
    return rms_norm_with_stats(x, scale, axis, epsilon, stash_dtype)[0]


def rms_norm_with_stats(x, scale, axis: int = -1, epsilon: float = 1e-5, stash_dtype=np.float32):
    """:func:`rms_norm` and the ``1 / sqrt(mean(x ** 2) + eps)`` it used (normalized dims kept as 1s)."""
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    xs = upcast(x).astype(stash_dtype)
    mean_square = (xs * xs).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
    inv_rms = 1 / np.sqrt(mean_square + np.asarray(epsilon, dtype=xs.dtype))
    y = downcast(downcast(xs * inv_rms, x.dtype) * upcast(scale), x.dtype)
    return y, downcast(inv_rms, np.dtype(stash_dtype))


def group_norm(x, scale, bias, num_groups: int, epsilon: float = 1e-5) -> np.ndarray:
    """Normalize each image's channel groups over (channels in group, spatial dims).

    ``scale``/``bias`` hold one value per channel (ONNX opset 21, OpenVINO), or
    one per group (ONNX opset 18) when their length is ``num_groups``.
    """
    x = np.asarray(x)
    n, c = x.shape[:2]
    if c % num_groups:
        raise ExecutionError(f"{c} channels do not split into {num_groups} groups")
    grouped = upcast(x).reshape(n, num_groups, -1)
    normalized = (grouped - grouped.mean(axis=2, keepdims=True)) / np.sqrt(grouped.var(axis=2, keepdims=True) + epsilon)
    scale, bias = upcast(scale).reshape(-1), upcast(bias).reshape(-1)
    if scale.size == num_groups and num_groups != c:
        scale, bias = np.repeat(scale, c // num_groups), np.repeat(bias, c // num_groups)
    y = normalized.reshape(x.shape) * _channel_shape(scale, x.ndim) + _channel_shape(bias, x.ndim)
    return downcast(y, x.dtype)


def lrn(
    x, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0, axes: Sequence[int] = (1,)
) -> np.ndarray:
    """Local response normalization over a window along ``axes`` (see the module docstring)."""
    before = (size - 1) // 2
    return _lrn(x, size, before, size - 1 - before, alpha, beta, bias, axes)


def lrn_symmetric(
    x, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0, axes: Sequence[int] = (1,)
) -> np.ndarray:
    """Local response normalization over a window centred on each element (see the module docstring)."""
    if size < 1:
        raise ExecutionError(f"LRN size must be positive, got {size}")
    half = (size - 1) // 2
    return _lrn(x, size, half, half, alpha, beta, bias, axes)


def _lrn(x, size, before, after, alpha, beta, bias, axes) -> np.ndarray:
    x = np.asarray(x)
    xc = upcast(x)
    axes = normalize_axes(axes, x.ndim)
    # The box of squares is summed one axis at a time (it is separable), each axis as a few
    # shifted in-place adds: much faster than reducing the trailing axes of a window view.
    square_sum = xc * xc
    for axis in axes:
        square_sum = _window_sum(square_sum, axis, before, after)
    square_sum *= alpha / size ** len(axes)
    square_sum += bias
    np.power(square_sum, beta, out=square_sum)
    return downcast(np.divide(xc, square_sum, out=square_sum), x.dtype)


def _window_sum(a: np.ndarray, axis: int, before: int, after: int) -> np.ndarray:
    """Sum of ``a`` over ``[i - before, i + after]`` along ``axis`` (zeros outside), same shape."""
    n = a.shape[axis]
    padded = pad_or_crop(a, [axis], [before], [after])
    lead = (slice(None),) * axis
    total = padded[lead + (slice(0, n),)].copy()
    for k in range(1, before + after + 1):
        total += padded[lead + (slice(k, k + n),)]
    return total


def mean_variance_normalization(
    x,
    axes: Sequence[int] = (0, 2, 3),
    normalize_variance: bool = True,
    epsilon: float = 1e-9,
    eps_inside_sqrt: bool = False,
) -> np.ndarray:
    """``(x - mean) / std`` over ``axes``; ONNX adds ``epsilon`` to the std (outside the sqrt)."""
    x = np.asarray(x)
    xc = upcast(x)
    axes = normalize_axes(axes, x.ndim)
    centred = xc - xc.mean(axis=axes, keepdims=True)
    if not normalize_variance:
        return downcast(centred, x.dtype)
    var = (centred * centred).mean(axis=axes, keepdims=True)
    std = np.sqrt(var + epsilon) if eps_inside_sqrt else np.sqrt(var) + epsilon
    return downcast(centred / std, x.dtype)


def lp_normalization(x, axis: int = -1, p: int = 2) -> np.ndarray:
    """``x / ||x||_p`` along ``axis`` (p is 1 or 2); a zero vector stays zero."""
    x = np.asarray(x)
    xc = upcast(x)
    axis = normalize_axis(axis, x.ndim)
    if p == 1:
        norm = np.abs(xc).sum(axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt((xc * xc).sum(axis=axis, keepdims=True))
    else:
        raise ExecutionError(f"lp_normalization supports p=1 or p=2, got {p}")
    # An all-zero slice has norm 0 and stays all zeros (as onnxruntime leaves it).
    return downcast(xc / np.where(norm == 0, 1, norm), x.dtype)


def _on_axis(function):
    """Apply ``function(x, axis)`` on ``axis`` or on the legacy 2-D view."""

    def apply(x, axis: int = -1, coerce_2d: bool = False):
        x = np.asarray(x)
        xc = upcast(x)
        axis = normalize_axis(axis, x.ndim)
        if coerce_2d:
            flat = xc.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
            return downcast(function(flat, 1).reshape(x.shape), x.dtype)
        return downcast(function(xc, axis), x.dtype)

    apply.__name__ = function.__name__.lstrip("_")
    apply.__doc__ = function.__doc__
    return apply


def _softmax(x, axis):
    """``exp(x) / sum(exp(x))`` along ``axis`` (shifted by the max for stability)."""
    shifted = x - x.max(axis=axis, keepdims=True)
    if shifted.dtype.kind != "f":
        e = np.exp(shifted)
        return e / e.sum(axis=axis, keepdims=True)
    e = np.exp(shifted, out=shifted)  # the same values, in this call's own buffer
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax(x, axis):
    """``x - log(sum(exp(x)))`` along ``axis``, computed stably."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _hardmax(x, axis):
    """1 at the first maximum along ``axis``, 0 elsewhere."""
    first = np.expand_dims(x.argmax(axis=axis), axis)
    out = np.zeros_like(x)
    np.put_along_axis(out, first, 1, axis=axis)
    return out


softmax = _on_axis(_softmax)
log_softmax = _on_axis(_log_softmax)
hardmax = _on_axis(_hardmax)


# ---------------------------------------------------------------- losses


def nll_loss(log_prob, target, weight=None, ignore_index: int | None = None, reduction: str = "mean"):
    """Negative log-likelihood loss of ``log_prob`` ``(N, C, *d)`` at class indices ``target`` ``(N, *d)``.

    Each element's loss is ``-log_prob[n, target, ...] * weight[target]``;
    targets equal to ``ignore_index`` weigh 0.  ``reduction``: ``none``
    (shape ``(N, *d)``), ``sum``, or ``mean`` (the weighted mean: divided by
    the sum of the weights used).
    """
    log_prob = np.asarray(log_prob)
    xc = upcast(log_prob)
    target = np.asarray(target).astype(np.int64)
    classes = log_prob.shape[1]
    ignored = target == ignore_index if ignore_index is not None else np.zeros(target.shape, bool)
    safe = np.where(ignored, 0, target)
    if safe.size and (safe.min() < 0 or safe.max() >= classes):
        raise ExecutionError(f"target class index out of range [0, {classes})")
    picked = -np.take_along_axis(xc, safe[:, None], axis=1)[:, 0]
    w = upcast(weight)[safe] if weight is not None else np.ones(safe.shape, xc.dtype)
    w = np.where(ignored, 0, w).astype(xc.dtype)
    loss = picked * w
    if reduction == "none":
        return downcast(loss, log_prob.dtype)
    if reduction == "sum":
        return downcast(loss.sum(), log_prob.dtype)
    if reduction == "mean":
        with np.errstate(divide="ignore", invalid="ignore"):
            return downcast(loss.sum() / w.sum(), log_prob.dtype)
    raise ExecutionError(f"unknown reduction {reduction!r}; expected 'none', 'sum' or 'mean'")


def batch_norm_grad(x, scale, mean, var, grad_output, epsilon: float = 1e-5, axis: int = 1):
    """Gradients of ``y = (x - mean) / sqrt(var + eps) * scale + bias`` with the batch statistics
    ``mean``/``var`` (XLA ``BatchNormGrad``), channels on ``axis``.

    Returns ``(grad_x, grad_scale, grad_bias)``: with ``r = 1 / sqrt(var + eps)``
    and ``m`` the element count per channel,
    ``grad_x = scale * r * (g - sum(g) / m - (x - mean) * r**2 * sum(g * (x - mean)) / m)``,
    ``grad_scale = sum(g * (x - mean) * r)``, ``grad_bias = sum(g)``.
    """
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    xc, g = upcast(x), upcast(grad_output)
    others = tuple(d for d in range(x.ndim) if d != axis)
    count = x.size // max(x.shape[axis], 1) if x.size else 1
    centred = xc - _channel_shape(mean, x.ndim, axis)
    rstd = 1 / np.sqrt(upcast(var) + np.asarray(epsilon, dtype=upcast(var).dtype))
    sum_g = g.sum(axis=others)
    sum_gc = (g * centred).sum(axis=others)
    r = _channel_shape(rstd, x.ndim, axis)
    grad_x = (
        _channel_shape(scale, x.ndim, axis)
        * r
        * (
            g
            - _channel_shape(sum_g, x.ndim, axis) / count
            - centred * r * r * _channel_shape(sum_gc, x.ndim, axis) / count
        )
    )
    return downcast(grad_x, x.dtype), downcast(sum_gc * rstd, x.dtype), downcast(sum_g, x.dtype)


def binary_cross_entropy(prob, target, weight=None, reduction: str = "mean"):
    """``-weight * (t * log(p) + (1 - t) * log(1 - p))`` per element (PyTorch ``BCELoss``: each log
    is clamped to >= -100), reduced by ``none``, ``sum`` or ``mean``."""
    prob = np.asarray(prob)
    p, t = upcast(prob), upcast(target)
    with np.errstate(divide="ignore"):
        log_p, log_q = np.maximum(np.log(p), -100), np.maximum(np.log1p(-p), -100)
    loss = -(t * log_p + (1 - t) * log_q)
    if weight is not None:
        loss = loss * upcast(weight)
    if reduction == "none":
        return downcast(loss, prob.dtype)
    if reduction == "sum":
        return downcast(loss.sum(), prob.dtype)
    if reduction == "mean":
        return downcast(loss.mean(), prob.dtype)
    raise ExecutionError(f"unknown reduction {reduction!r}; expected 'none', 'sum' or 'mean'")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0):
    """Connectionist temporal classification loss per sequence (PyTorch ``ctc_loss``, no reduction).

    ``log_probs``: ``(T, N, C)`` (or ``(T, C)`` for one sequence); ``targets``:
    ``(N, S)`` padded, or 1-D with the sequences concatenated; lengths ``(N,)``.
    Returns ``(loss, log_alpha)``: ``loss[n] = -log p(target_n | input_n)``
    (``inf`` when no alignment exists) and the forward variables ``log_alpha``
    ``(N, T, 2 * S + 1)`` over the blank-extended target, ``-inf`` where
    unreachable or past a sequence's lengths (without the ``N`` dim for a
    ``(T, C)`` input).
    """
    log_probs = np.asarray(log_probs)
    unbatched = log_probs.ndim == 2
    lp = upcast(log_probs)
    if unbatched:
        lp = lp[:, None]
    steps, batch, _ = lp.shape
    input_lengths = np.asarray(input_lengths, dtype=np.int64).reshape(-1)
    target_lengths = np.asarray(target_lengths, dtype=np.int64).reshape(-1)
    targets = np.asarray(targets, dtype=np.int64)
    if targets.ndim == 1:  # concatenated sequences
        bounds = np.concatenate([[0], np.cumsum(target_lengths)])
        width = int(target_lengths.max(initial=0))
        padded = np.full((batch, width), blank, dtype=np.int64)
        for n in range(batch):
            padded[n, : target_lengths[n]] = targets[bounds[n] : bounds[n + 1]]
        targets = padded
    width = targets.shape[1]
    ext = np.full((batch, 2 * width + 1), blank, dtype=np.int64)
    ext[:, 1::2] = targets
    positions = np.arange(2 * width + 1)
    valid = positions[None, :] < (2 * target_lengths[:, None] + 1)
    # A skip from s-2 to s is allowed onto a label that differs from the label two back.
    skip = np.zeros_like(valid)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    emit = np.take_along_axis(lp, np.broadcast_to(ext[None], (steps,) + ext.shape), axis=2)  # (T, N, 2S+1)

    alpha = np.full((batch, steps, 2 * width + 1), -np.inf, dtype=lp.dtype)
    if steps:
        first = np.full((batch, 2 * width + 1), -np.inf, dtype=lp.dtype)
        first[:, 0] = emit[0, :, 0]
        if width:
            first[:, 1] = np.where(target_lengths > 0, emit[0, :, 1], -np.inf)
        alpha[:, 0] = np.where(valid & (input_lengths[:, None] > 0), first, -np.inf)
    with np.errstate(invalid="ignore"):
        for t in range(1, steps):
            prev = alpha[:, t - 1]
            stay = prev
            step = np.concatenate([np.full((batch, 1), -np.inf, lp.dtype), prev[:, :-1]], axis=1)
            jump = np.concatenate([np.full((batch, 2), -np.inf, lp.dtype), prev[:, :-2]], axis=1)
            jump = np.where(skip, jump, -np.inf)
            total = np.logaddexp(np.logaddexp(stay, step), jump) + emit[t]
            alpha[:, t] = np.where(valid & (t < input_lengths[:, None]), total, -np.inf)
    last = np.clip(input_lengths - 1, 0, max(steps - 1, 0))
    final = alpha[np.arange(batch), last] if steps else np.full((batch, 2 * width + 1), -np.inf, lp.dtype)
    end = 2 * target_lengths
    tail = np.take_along_axis(final, end[:, None], axis=1)[:, 0]
    before = np.where(end > 0, np.take_along_axis(final, np.maximum(end - 1, 0)[:, None], axis=1)[:, 0], -np.inf)
    loss = -np.logaddexp(tail, before)
    if unbatched:
        loss, alpha = loss[0], alpha[0]
    return downcast(loss, log_probs.dtype), downcast(alpha, log_probs.dtype)

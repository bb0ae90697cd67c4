"""ai.onnx NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12+) decomposed, once for every target.

The picked log-probability of each position is ``GatherElements`` of the class axis at the target (an ignored
target reads class 0 instead, so that any integer may be ignored, in range or not); ignored positions get
weight 0, and the mean reduction divides by the sum of the weights actually used (the count without weights).
Inputs of more than one spatial axis are computed on one flattened spatial axis (the loss is per position, so
this is exact; OpenVINO 2023.0's CPU plugin cannot compile these steps on the 7-D tensors of ``N, C, d1 ... d5``).
"""

from __future__ import annotations

import math

import numpy as np

from .registry import Emitter, Refusal, decomposes


def _squeeze_class_axis(e: Emitter, x):
    return e("Squeeze", x, e.ints([1])) if e.opset >= 13 else e("Squeeze", x, axes=[1])


def nll(e: Emitter, log_prob, target, weight):
    """The loss of ``log_prob`` (N, C, d...) against ``target`` (N, d...) as the node reduces it."""
    reduction = e.attr("reduction", "mean")
    ignore = e.node.attrs.get("ignore_index")
    dtype = e.dtype(log_prob)
    index = e.cast(target, "int64") if e.dtype(target) != "int64" else target
    keep = None
    if ignore is not None:
        keep = e("Not", e("Equal", index, e.const(np.int64(ignore.value))))
        index = e("Where", keep, index, e.const(np.int64(0)))
    picked = _squeeze_class_axis(e, e("GatherElements", log_prob, e.unsqueeze(index, [1]), axis=1))
    loss = e("Neg", picked)
    scale = None
    if weight is not None:
        scale = e("Gather", weight, index, axis=0)
    if keep is not None:
        scale = e("Where", keep, scale if scale is not None else e.scalar(1.0, dtype), e.scalar(0.0, dtype))
    if scale is not None:
        loss = e("Mul", loss, scale)
    if reduction == "none":
        return loss
    total = e("ReduceSum", loss, keepdims=0)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise Refusal(f"reduction {reduction!r}")
    if scale is None:
        return e("ReduceMean", loss, keepdims=0)
    return e("Div", total, e("ReduceSum", scale, keepdims=0))


def _flattened(e: Emitter, x, target):
    """(``x`` as (N, C, D), ``target`` as (N, D), the shape to give back to a per-position result, or None)."""
    shape = e.static_shape(x)
    if shape is None or len(shape) <= 3:
        return x, target, None
    flat = [shape[0], shape[1], math.prod(shape[2:])]
    return e("Reshape", x, e.ints(flat)), e("Reshape", target, e.ints([flat[0], flat[2]])), list(shape)


def _losses(e: Emitter, log_prob, target, shape):
    """The node's loss of the flattened inputs, given its per-position shape back (reduction "none")."""
    loss = nll(e, log_prob, target, e.input(2))
    if shape is None or e.attr("reduction", "mean") != "none":
        return loss
    return e("Reshape", loss, e.ints(shape[:1] + shape[2:]))


@decomposes("NegativeLogLikelihoodLoss", domain="", since=12, composite=True)
def negative_log_likelihood_loss_12(e: Emitter):
    log_prob, target, shape = _flattened(e, e.input(0), e.input(1))
    return [_losses(e, log_prob, target, shape)]


def _log_softmax_of_classes(e: Emitter, scores):
    """LogSoftmax over axis 1 (before opset 13 LogSoftmax flattens the axes after ``axis``: the classes are moved
    last first)."""
    rank = e.rank(scores)
    if e.opset >= 13 or rank == 2:
        return e("LogSoftmax", scores, axis=1)
    if rank is None:
        raise Refusal("the rank of the scores is unknown")
    last = [0] + list(range(2, rank)) + [1]
    back = [0, rank - 1] + list(range(1, rank - 1))
    return e("Transpose", e("LogSoftmax", e("Transpose", scores, perm=last), axis=rank - 1), perm=back)


@decomposes("SoftmaxCrossEntropyLoss", domain="", since=12, composite=True)
def softmax_cross_entropy_loss_12(e: Emitter):
    scores, target, shape = _flattened(e, e.input(0), e.input(1))
    log_prob = _log_softmax_of_classes(e, scores)
    given = None
    if e.output_used(1):
        given = log_prob if shape is None else e("Reshape", log_prob, e.ints(shape))
    return [_losses(e, log_prob, target, shape), given]

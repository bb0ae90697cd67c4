"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Numerics in :mod:`opconv.kernels.norm` (``nll_loss``, ``log_softmax``).  The
classes are on axis 1; later versions only widened the type sets.
"""

from __future__ import annotations

from ....kernels import norm as N
from ..executor import onnx_op


@onnx_op("NegativeLogLikelihoodLoss", since=[12, 13, 22])
def negative_log_likelihood_loss(ctx, x, target, weight=None, *, ignore_index, reduction):
    return N.nll_loss(x, target, weight, ignore_index, reduction)


@onnx_op("SoftmaxCrossEntropyLoss", since=[12, 13])
def softmax_cross_entropy_loss(ctx, scores, labels, weights=None, *, ignore_index, reduction):
    log_prob = N.log_softmax(scores, axis=1)
    loss = N.nll_loss(log_prob, labels, weights, ignore_index, reduction)
    return (loss, log_prob) if ctx.num_outputs > 1 else loss

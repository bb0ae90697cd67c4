"""Losses: BCELoss (PyTorch ``BCELoss``) and CTCLoss (PyTorch ``ctc_loss`` without reduction, plus the
forward variables); numerics in :mod:`opconv.kernels.norm`."""

from __future__ import annotations

from ....kernels import norm as K
from ..executor import hlo_op


@hlo_op("BCELoss")
def bce_loss(ctx, prob, target, weight=None, *, reduction):
    return K.binary_cross_entropy(prob, target, weight, reduction or "mean")


@hlo_op("CTCLoss")
def ctc_loss(ctx, log_probs, targets, input_lengths, target_lengths, *, blank):
    return K.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank)

"""ONNX loss operators -> opset1: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

opset1 has no loss operation, so both are built from comparisons and reductions.  The class picked by each
target is selected with ``Equal(target, [0, 1, ..., C-1])`` and ``Select`` rather than Gather or a one-hot
product: Select leaves the other classes' values out entirely (``-inf * 0`` would be NaN), and an ignored target
may be any integer, in range or not, without indexing out of bounds.
"""

from __future__ import annotations

import numpy as np

from ._common import Refuse, Rule, attr, captures, const, dtype_of, i64, ov, static_shape
from .nn import _log_softmax_along


def _class_hits(b, target, rank: int, classes: int):
    """``[N, C, d...]`` booleans: where ``target`` names class c (``Equal(target, [0, 1, ..., C-1])``)."""
    index = ov(b, "Unsqueeze", target, i64(b, [1], "class_axis"))
    labels = np.arange(classes).reshape([1, classes] + [1] * (rank - 2)).astype(dtype_of(target))
    return ov(b, "Equal", index, b.const(labels, "classes"), auto_broadcast="numpy")


def _picked(b, hits, values, dtype: np.dtype):
    """``values[n, target[n, d...], d...]`` for every target position.

    ``values`` is ``[N, C, d...]`` or broadcasts to it (per-class weights as ``[1, C, 1...]``)."""
    chosen = ov(b, "Select", hits, values, const(b, 0, dtype, "zero"), auto_broadcast="numpy")
    return ov(b, "ReduceSum", chosen, i64(b, [1], "class_axis"), keep_dims=False)


def _nll(b, log_prob, target, weight, node, source):
    """The loss of ``log_prob`` ``[N, C, d...]`` against ``target`` ``[N, d...]`` as the node reduces it.

    ``source`` is the node's first input, whose static shape and type ``log_prob`` has."""
    shape = static_shape(source)
    rank = len(shape)
    if rank < 2:
        raise Refuse(f"input of rank {rank}: the class axis is missing")
    classes = shape[1]
    dtype = dtype_of(source)
    reduction = attr(node, "reduction", "mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    ignore = attr(node, "ignore_index")

    hits = _class_hits(b, target, rank, classes)
    picked = _picked(b, hits, log_prob, dtype)
    if weight is not None:
        per_class = ov(b, "Reshape", weight, i64(b, [1, classes] + [1] * (rank - 2), "class_shape"),
                       special_zero=False)
        scale = _picked(b, hits, per_class, dtype)
        loss = ov(b, "Multiply", picked, scale, auto_broadcast="numpy")
    else:
        scale = None
        loss = picked
    loss = ov(b, "Negative", loss)
    zero = const(b, 0, dtype, "zero")
    if ignore is not None:
        keep = ov(b, "NotEqual", target, const(b, int(ignore), dtype_of(target), "ignore_index"),
                  auto_broadcast="numpy")
        loss = ov(b, "Select", keep, loss, zero, auto_broadcast="numpy")
        one = const(b, 1, dtype, "one")
        scale = ov(b, "Select", keep, scale if scale is not None else one, zero, auto_broadcast="numpy")
    if reduction == "none":
        return loss
    every_axis = i64(b, list(range(rank - 1)), "all_axes")
    total = ov(b, "ReduceSum", loss, every_axis, keep_dims=False)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise Refuse(f"reduction {reduction!r}")
    if scale is None:  # no weights, nothing ignored: the plain mean
        count = int(np.prod(shape[:1] + shape[2:]))
        return ov(b, "Divide", total, const(b, count, dtype, "count"), auto_broadcast="numpy")
    if weight is None:
        scale = ov(b, "Broadcast", scale, i64(b, shape[:1] + shape[2:], "target_shape"), mode="numpy")
    return ov(b, "Divide", total, ov(b, "ReduceSum", scale, every_axis, keep_dims=False), auto_broadcast="numpy")


def _nll_loss(b, m):
    return _nll(b, m["x"], m["target"], m.values.get("weight"), m.root, m["x"])


def _softmax_cross_entropy(b, m):
    node = m.root
    log_prob = _log_softmax_along(b, m["x"], 1)
    loss = _nll(b, log_prob, m["target"], m.values.get("weight"), node, m["x"])
    wanted = node.outputs + [None]
    return [loss, log_prob if wanted[1] is not None else None]


def _sce_pattern(names):
    fn = captures(lambda p, *xs: p.node("SoftmaxCrossEntropyLoss", *xs, _outputs=2), names)
    fn.__name__ = "SoftmaxCrossEntropyLoss"
    return fn


def _nll_pattern(names):
    fn = captures(lambda p, *xs: p.node("NegativeLogLikelihoodLoss", *xs), names)
    fn.__name__ = "NegativeLogLikelihoodLoss"
    return fn


RULES = [
    Rule("NegativeLogLikelihoodLoss-decomposed", _nll_pattern(["x", "target"]), _nll_loss),
    Rule("NegativeLogLikelihoodLoss-weight-decomposed", _nll_pattern(["x", "target", "weight"]), _nll_loss),
    Rule("SoftmaxCrossEntropyLoss-decomposed", _sce_pattern(["x", "target"]), _softmax_cross_entropy),
    Rule("SoftmaxCrossEntropyLoss-weight-decomposed", _sce_pattern(["x", "target", "weight"]),
         _softmax_cross_entropy),
]

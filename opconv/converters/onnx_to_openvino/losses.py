"""ONNX loss operators -> opset1: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

opset1 has no loss operation, so both are built from comparisons and reductions.  The class picked by each
target is selected with ``Equal(target, [0, 1, ..., C-1])`` and ``Select`` rather than Gather or a one-hot
product: Select leaves the other classes' values out entirely (``-inf * 0`` would be NaN), and an ignored target
may be any integer, in range or not, without indexing out of bounds.
"""

from __future__ import annotations

import math

import numpy as np

from ._common import Refuse, Rule, attr, captures, const, np_dtype, i64, ov, static_shape
from .nn import _log_softmax_along


def _class_hits(b, target, target_dtype: np.dtype, rank: int, classes: int):
    """``[N, C, d...]`` booleans: where ``target`` names class c (``Equal(target, [0, 1, ..., C-1])``)."""
    index = ov(b, "Unsqueeze", target, i64(b, [1], "class_axis"))
    labels = np.arange(classes).reshape([1, classes] + [1] * (rank - 2)).astype(target_dtype)
    return ov(b, "Equal", index, b.const(labels, "classes"), auto_broadcast="numpy")


def _picked(b, hits, values, dtype: np.dtype):
    """``values[n, target[n, d...], d...]`` for every target position.

    ``values`` is ``[N, C, d...]`` or broadcasts to it (per-class weights as ``[1, C, 1...]``)."""
    chosen = ov(b, "Select", hits, values, const(b, 0, dtype, "zero"), auto_broadcast="numpy")
    return ov(b, "ReduceSum", chosen, i64(b, [1], "class_axis"), keep_dims=False)


def _reduction(node) -> str:
    reduction = attr(node, "reduction", "mean")
    return reduction.decode() if isinstance(reduction, bytes) else reduction


def _nll(b, log_prob, target, weight, node, shape: tuple[int, ...], dtype: np.dtype):
    """The loss of ``log_prob`` ``[N, C, d...]`` (of static ``shape`` and type ``dtype``) against ``target``
    ``[N, d...]`` as the node reduces it."""
    rank = len(shape)
    classes = shape[1]
    reduction = _reduction(node)
    ignore = attr(node, "ignore_index")

    target_dtype = np_dtype(node.inputs[1])  # the node's own target: ``target`` may be a reshape of it
    hits = _class_hits(b, target, target_dtype, rank, classes)
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
        keep = ov(b, "NotEqual", target, const(b, int(ignore), target_dtype, "ignore_index"),
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


def _one_spatial_axis(b, x, target, shape: tuple[int, ...]):
    """``x`` as ``[N, C, D]`` and ``target`` as ``[N, D]`` (D the product of the spatial dims) and that shape.

    The loss is computed per position, so the reshapes are exact; older CPU plugins (OpenVINO 2023.0) cannot
    compile these steps on the 7-D tensors of ``N, C, d1 ... d5``."""
    if len(shape) < 2:
        raise Refuse(f"input of rank {len(shape)}: the class axis is missing")
    if len(shape) <= 3:
        return x, target, shape
    flat = (shape[0], shape[1], math.prod(shape[2:]))
    x = ov(b, "Reshape", x, i64(b, flat, "flat_shape"), special_zero=False)
    target = ov(b, "Reshape", target, i64(b, [flat[0], flat[2]], "flat_target_shape"), special_zero=False)
    return x, target, flat


def _reshaped(b, value, shape: tuple[int, ...], full: list[int]):
    """``value`` given the shape ``full`` again when :func:`_one_spatial_axis` flattened it to ``shape``."""
    if list(shape) == list(full):
        return value
    return ov(b, "Reshape", value, i64(b, full, "shape"), special_zero=False)


def _losses(b, m, log_prob, target, flat, shape):
    """The node's loss, given its per-position shape back when it keeps one (reduction "none")."""
    loss = _nll(b, log_prob, target, m.values.get("weight"), m.root, flat, np_dtype(m["x"]))
    if _reduction(m.root) != "none":
        return loss
    return _reshaped(b, loss, flat[:1] + flat[2:], [shape[0], *shape[2:]])


def _nll_loss(b, m):
    shape = static_shape(m["x"])
    x, target, flat = _one_spatial_axis(b, m["x"], m["target"], shape)
    return _losses(b, m, x, target, flat, shape)


def _softmax_cross_entropy(b, m):
    shape = static_shape(m["x"])
    x, target, flat = _one_spatial_axis(b, m["x"], m["target"], shape)
    log_prob = _log_softmax_along(b, x, 1)
    loss = _losses(b, m, log_prob, target, flat, shape)
    wanted = m.root.outputs + [None]
    return [loss, _reshaped(b, log_prob, flat, list(shape)) if wanted[1] is not None else None]


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

"""Loss ONNX ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, decomposed.

The picked log-probabilities are a Gather of the class axis at the target
indices (the GatherElements form); ``ignore_index`` targets get weight 0,
and the mean reduction divides by the sum of the weights actually used.
"""

from __future__ import annotations

from ...types import TensorType
from .. import lowering
from ._common import (Refuse, attr, binary, compare, convert, dtype_of, full, hlo, iota, op_rules, out_type, reduce,
                      reshape, scalar, select, shape_of, unary)
from ._common import concat as _concat


def _reduction(node) -> str:
    value = attr(node, "reduction", "mean")
    return value.decode() if isinstance(value, bytes) else value


def _pick_classes(b, logp, target):
    """logp[n, target[n, d...], d...] for every (n, d...): [N, d...]."""
    ts = shape_of(target)
    rank = len(ts) + 1
    idx = reshape(b, convert(b, target, "int64"), ts + (1,))
    parts = []
    for d in range(rank):
        if d == 1:
            parts.append(idx)
        else:
            parts.append(iota(b, "int64", ts + (1,), d if d == 0 else d - 1))
    vectors = _concat(b, parts, len(ts))
    return hlo(b, "Gather", logp, vectors, type=TensorType(dtype_of(logp), ts), index_vector_dim=len(ts),
               start_index_map=list(range(rank)), collapsed_slice_dims=list(range(rank)), offset_dims=[],
               slice_sizes=[1] * rank, indices_are_sorted=False)


def nll(b, node, logp, target, weight):
    dt = dtype_of(logp)
    ts = shape_of(target)
    ignore = attr(node, "ignore_index")
    target64 = convert(b, target, "int64")
    if ignore is not None:
        keep = compare(b, target64, scalar(b, int(ignore), "int64"), "NE")
        target64 = select(b, keep, target64, full(b, 0, "int64", ts))
    picked = unary(b, "Neg", _pick_classes(b, logp, target64))
    if weight is not None:
        w = hlo(b, "Gather", weight, target64, type=TensorType(dtype_of(weight), ts), index_vector_dim=len(ts),
                start_index_map=[0], collapsed_slice_dims=[0], offset_dims=[], slice_sizes=[1],
                indices_are_sorted=False)
    else:
        w = full(b, 1, dt, ts)
    if ignore is not None:
        w = select(b, keep, w, full(b, 0, dt, ts))
    loss = binary(b, "Mul", picked, w) if weight is not None or ignore is not None else picked
    reduction = _reduction(node)
    axes = list(range(len(ts)))
    if reduction == "none":
        return loss
    total = reduce(b, loss, axes, "ADD")
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise Refuse(f"reduction {reduction!r}")
    return binary(b, "Div", total, reduce(b, w, axes, "ADD"))


def _nll(b, m):
    node = m.root
    logp, target = node.inputs[:2]
    weight = node.inputs[2] if len(node.inputs) > 2 else None
    y = nll(b, node, logp, target, weight)
    if shape_of(y) != out_type(m).shape:
        raise Refuse("the loss shape differs from the ONNX output")
    return y


def _softmax_cross_entropy(b, m):
    node = m.root
    scores, labels = node.inputs[:2]
    weight = node.inputs[2] if len(node.inputs) > 2 else None
    logp = hlo(b, "Softmax", scores, type=TensorType(dtype_of(scores), shape_of(scores)), axis=1, accurate=True,
               logarithmic=True)
    y = nll(b, node, logp, labels, weight)
    outs = [y]
    if m.n_outputs > 1:
        outs.append(logp if len(node.outputs) > 1 and node.outputs[1] is not None else None)
    return outs


RULES = (op_rules("NegativeLogLikelihoodLoss-decomposed", "NegativeLogLikelihoodLoss", _nll, 3, 2)
         + op_rules("SoftmaxCrossEntropyLoss-decomposed", "SoftmaxCrossEntropyLoss", _softmax_cross_entropy, 3, 2,
                    _outputs=2))
lowering.add_rules("onnx", "hlo", RULES)

"""Einsum -> opset1 Transpose / Reshape / ReduceSum / MatMul (opset1 has no Einsum).

An equation of one or two operands whose labels each appear once per operand is a batched matrix product:
labels only one operand has and the output lacks are summed first; the rest are grouped as batch (both
operands and the output), contracted (both operands, not the output) and kept (one operand and the output);
each operand is transposed and reshaped to ``[batch, rows, contracted]`` / ``[batch, contracted, columns]``,
multiplied, and the product reshaped and transposed to the output's labels.  Repeated labels within an
operand (diagonals) are refused.
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import Refuse, i64, ov, static_shape, text_attr


def _parse(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The operands' labels and the output's; ``...`` becomes labels of its own (upper case)."""
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Refuse(f"the equation names {len(terms)} operands, the node has {len(ranks)}")
    width = max((rank - len(t.replace("...", "")) for t, rank in zip(terms, ranks) if "..." in t), default=0)
    ellipsis = "".join(chr(ord("A") + i) for i in range(width))

    def expand(term: str, rank: int | None) -> str:
        if "..." not in term:
            return term
        own = ellipsis[width - (rank - len(term.replace("...", ""))) :] if rank is not None else ellipsis
        return term.replace("...", own)

    terms = [expand(t, r) for t, r in zip(terms, ranks)]
    for t, rank in zip(terms, ranks):
        if (t and not t.isalpha()) or len(t) != rank:
            raise Refuse(f"operand labels {t!r} do not match its rank {rank}")
        if len(set(t)) != len(t):
            raise Refuse(f"repeated label in {t!r} (a diagonal)")
    if arrow:
        out = expand(out, None)
    else:
        counts = {c: sum(t.count(c) for t in terms) for c in set("".join(terms))}
        out = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ellipsis))
    return terms, out


def _transpose(b, x, labels: str, order: str):
    if labels == order:
        return x
    return ov(b, "Transpose", x, i64(b, [labels.index(c) for c in order], "perm"))


def _sum_out(b, x, labels: str, keep: set[str]):
    """``x`` with the labels outside ``keep`` summed away."""
    gone = [i for i, c in enumerate(labels) if c not in keep]
    if not gone:
        return x, labels
    return (ov(b, "ReduceSum", x, i64(b, gone, "axes"), keep_dims=False), "".join(c for c in labels if c in keep))


def _reshape(b, x, shape: list[int]):
    return ov(b, "Reshape", x, i64(b, shape, "shape"), special_zero=False)


@lower("onnx", "openvino", "Einsum", inputs=(1, 2))
def _einsum(b, m):
    operands = list(m.root.inputs)
    shapes = [static_shape(v) for v in operands]
    equation = str(text_attr(m.root, "equation"))
    terms, out = _parse(equation, [len(s) for s in shapes])
    dims: dict[str, int] = {}
    for t, shape in zip(terms, shapes):
        for c, d in zip(t, shape):
            if dims.setdefault(c, d) != d:
                raise Refuse(f"label {c!r} has sizes {dims[c]} and {d} (broadcasting is not mapped)")
    if len(operands) == 1:
        x, labels = _sum_out(b, operands[0], terms[0], set(out))
        return _transpose(b, x, labels, out)
    if len(operands) != 2:
        raise Refuse(f"{len(operands)} operands (one or two are mapped)")
    (a, ta), (c, tc) = (
        _sum_out(b, v, t, set(out) | set(other))
        for v, t, other in ((operands[0], terms[0], terms[1]), (operands[1], terms[1], terms[0]))
    )
    batch = [x for x in out if x in ta and x in tc]
    contracted = [x for x in ta if x in tc and x not in out]
    rows = [x for x in ta if x not in tc]
    cols = [x for x in tc if x not in ta]
    size = lambda labels: int(np.prod([dims[x] for x in labels], dtype=np.int64))  # noqa: E731
    left = _reshape(
        b, _transpose(b, a, ta, "".join(batch + rows + contracted)), [size(batch), size(rows), size(contracted)]
    )
    right = _reshape(
        b, _transpose(b, c, tc, "".join(batch + contracted + cols)), [size(batch), size(contracted), size(cols)]
    )
    product = ov(b, "MatMul", left, right, transpose_a=False, transpose_b=False)
    labels = "".join(batch + rows + cols)
    if not labels:
        return ov(b, "Squeeze", product, i64(b, [0, 1, 2], "axes"))
    product = _reshape(b, product, [dims[x] for x in labels])
    return _transpose(b, product, labels, out)

"""Linear algebra: MatMul, Gemm, Einsum (numerics in :mod:`opconv.kernels.linalg`).

* MatMul is numpy's ``matmul`` in every version (later ones only added types).
* Gemm-1/6 required ``C`` and broadcast it only with ``broadcast=1`` (else it must be ``(M, N)``);
  from Gemm-7 ``C`` always broadcasts unidirectionally to ``(M, N)``, and from Gemm-11 it is optional.
* Einsum's grammar is numpy's; spaces are allowed.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import linalg
from ..executor import onnx_op


@onnx_op("MatMul", since=[1, 9, 13])
def matmul_1(ctx, a, b):
    return linalg.matmul(a, b)


def _product_shape(a, b, trans_a, trans_b) -> tuple[int, int]:
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ExecutionError(f"Gemm needs 2-D A and B, got {list(a.shape)} and {list(b.shape)}")
    return a.shape[1 if trans_a else 0], b.shape[0 if trans_b else 1]


@onnx_op("Gemm", since=[1, 6])
def gemm_1(ctx, a, b, c, *, alpha, beta, broadcast, transA, transB):
    m, n = _product_shape(a, b, transA, transB)
    if not broadcast and np.shape(c) != (m, n):
        raise ExecutionError(
            f"Gemm C has shape {list(np.shape(c))}, expected [{m}, {n}] (set broadcast=1 to broadcast it)"
        )
    return gemm_7(ctx, a, b, c, alpha=alpha, beta=beta, transA=transA, transB=transB)


@onnx_op("Gemm", since=[7, 9, 11, 13])
def gemm_7(ctx, a, b, c=None, *, alpha, beta, transA, transB):
    m, n = _product_shape(a, b, transA, transB)
    if c is not None and np.broadcast_shapes(np.shape(c), (m, n)) != (m, n):
        raise ExecutionError(f"Gemm C of shape {list(np.shape(c))} does not broadcast to [{m}, {n}]")
    return linalg.gemm(a, b, c, alpha, beta, bool(transA), bool(transB))


@onnx_op("Einsum", since=[12, 28])
def einsum_12(ctx, *inputs, equation):
    return linalg.einsum(equation, *inputs)

"""Dot, DotGeneral, DotGeneralBias, Gemm and Cholesky (numerics: :mod:`opconv.kernels.linalg`, BLAS for floats).

DotGeneral's result dims are ``(batch..., lhs free..., rhs free...)`` as in
XLA; DotGeneralBias adds its rank-1 bias along the result's last dim.
Cholesky reads only the triangle it returns (lower, or upper when ``lower``
is false), as XLA does.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import linalg as L
from ....kernels._common import accumulator_dtype, downcast
from ..executor import hlo_op


@hlo_op("Dot")
def dot(ctx, lhs, rhs):
    if not (1 <= np.ndim(lhs) <= 2 and 1 <= np.ndim(rhs) <= 2):
        raise ExecutionError(
            f"Dot takes rank-1 or rank-2 operands, got shapes {list(np.shape(lhs))} and {list(np.shape(rhs))}"
        )
    return L.matmul(lhs, rhs)


def _dot_general(
    lhs, rhs, lhs_batching_dimensions, rhs_batching_dimensions, lhs_contracting_dimensions, rhs_contracting_dimensions
):
    return L.dot_general(
        lhs,
        rhs,
        lhs_batching_dimensions or (),
        rhs_batching_dimensions or (),
        lhs_contracting_dimensions or (),
        rhs_contracting_dimensions or (),
    )


@hlo_op("DotGeneral")
def dot_general(ctx, lhs, rhs, **dims):
    return _dot_general(lhs, rhs, **dims)


@hlo_op("DotGeneralBias")
def dot_general_bias(ctx, lhs, rhs, bias, **dims):
    y = _dot_general(lhs, rhs, **dims)
    bias = np.asarray(bias)
    if bias.ndim != 1 or y.ndim == 0 or bias.shape[0] != y.shape[-1]:
        raise ExecutionError(f"bias of shape {list(bias.shape)} does not match the result's last dim ({list(y.shape)})")
    acc = accumulator_dtype(y.dtype)
    return downcast(y.astype(acc) + bias.astype(acc), y.dtype)


@hlo_op("Gemm")
def gemm(ctx, a, b, c=None, *, alpha, beta, transA, transB):
    return L.gemm(a, b, c, alpha, beta, bool(transA), bool(transB))


@hlo_op("Cholesky")
def cholesky(ctx, x, *, lower):
    return L.cholesky(x, lower=bool(lower))

"""Linear-algebra kernels: matmul, XLA dot_general, gemm, einsum, integer matmul, determinant.

Conventions
-----------
* :func:`matmul` is numpy's ``matmul`` (ONNX ``MatMul``): 1-D operands are
  promoted to a matrix and the added dim is removed again; batch dims
  broadcast.
* :func:`dot_general` is XLA's ``DotGeneral``: batch and contracting dims are
  named per operand, and the result's dims are ordered
  ``(batch..., lhs free..., rhs free...)``, the free dims keeping their order.
* :func:`gemm` is ``alpha * op(A) @ op(B) + beta * C`` with ``C`` broadcast to
  the ``(M, N)`` result (ONNX ``Gemm``).
* :func:`matmul_integer` is ONNX ``MatMulInteger``: zero points are a scalar
  or one value per row of ``A`` / per column of ``B``; the result is int32.

Floats go through BLAS; integers accumulate exactly in int64 and wrap back to
the input type.  Narrow floats are computed in float32 and cast back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import ExecutionError
from ._common import accumulator_dtype, downcast, upcast


def _result_dtype(*arrays) -> np.dtype:
    dtypes = {a.dtype for a in arrays}
    return dtypes.pop() if len(dtypes) == 1 else np.result_type(*arrays)


_BLAS_FLOATS = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Broadcasting matrix product with numpy/ONNX 1-D promotion rules."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype and a.dtype in _BLAS_FLOATS:
        return np.matmul(a, b)  # the common case, without the dtype bookkeeping below
    a, b = np.asarray(a), np.asarray(b)
    out = _result_dtype(a, b)
    acc = accumulator_dtype(out)
    return downcast(np.matmul(a.astype(acc, copy=False), b.astype(acc, copy=False)), out)


def dot_general(
    lhs: np.ndarray,
    rhs: np.ndarray,
    lhs_batch: Sequence[int] = (),
    rhs_batch: Sequence[int] = (),
    lhs_contracting: Sequence[int] = (),
    rhs_contracting: Sequence[int] = (),
) -> np.ndarray:
    """XLA ``DotGeneral``; result dims are ``(batch..., lhs free..., rhs free...)``."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lb, lc = list(lhs_batch), list(lhs_contracting)
    rb, rc = list(rhs_batch), list(rhs_contracting)
    if lhs.dtype == rhs.dtype and lhs.dtype in _BLAS_FLOATS:  # first: it checks the few sizes it relies on
        product = _plain_product(lhs, rhs, lb, rb, lc, rc)
        if product is not None:
            return product
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise ExecutionError("dot_general needs as many batch / contracting dims on each side")
    for name, (l_dims, r_dims) in {"batch": (lb, rb), "contracting": (lc, rc)}.items():
        if [lhs.shape[d] for d in l_dims] != [rhs.shape[d] for d in r_dims]:
            raise ExecutionError(f"dot_general {name} dims differ in size: {lhs.shape} vs {rhs.shape}")
    lf = [d for d in range(lhs.ndim) if d not in lb + lc]
    rf = [d for d in range(rhs.ndim) if d not in rb + rc]
    batch_shape = [lhs.shape[d] for d in lb]
    lhs_free = [lhs.shape[d] for d in lf]
    rhs_free = [rhs.shape[d] for d in rf]
    inner = math.prod(lhs.shape[d] for d in lc)
    # Bring both operands to (batch, rows, inner) x (batch, inner, cols): one batched matmul.
    lhs3 = lhs.transpose(lb + lf + lc).reshape(math.prod(batch_shape), math.prod(lhs_free), inner)
    rhs3 = rhs.transpose(rb + rc + rf).reshape(math.prod(batch_shape), inner, math.prod(rhs_free))
    return matmul(lhs3, rhs3).reshape(batch_shape + lhs_free + rhs_free)


def _plain_product(lhs, rhs, lb: list, rb: list, lc: list, rc: list) -> np.ndarray | None:
    """The layouts the converters write that numpy computes as they are, without the transposes and reshapes
    of the general case (most of its cost on small operands): every dim a batch dim (the element-wise
    product); leading batch dims, then a matrix product (``rhs`` maybe transposed: attention's q k^T); an
    N-D ``lhs`` by a matrix (a linear layer).  Else None, also when sizes differ (the caller says how)."""
    batch = len(lb)
    if lb != list(range(batch)) or rb != lb or len(lc) > 1 or len(rc) != len(lc):
        return None
    if not lc:
        return np.multiply(lhs, rhs) if batch == lhs.ndim == rhs.ndim and lhs.shape == rhs.shape else None
    if lc[0] != lhs.ndim - 1 or not 0 <= rc[0] < rhs.ndim or lhs.shape[-1] != rhs.shape[rc[0]]:
        return None
    if batch and lhs.ndim == rhs.ndim == batch + 2 and rc[0] >= batch and lhs.shape[:batch] == rhs.shape[:batch]:
        return np.matmul(lhs, rhs if rc[0] == batch else np.swapaxes(rhs, -1, -2))
    if not batch and rhs.ndim == 2:
        return np.matmul(lhs, rhs if rc[0] == 0 else rhs.T)
    return None


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> np.ndarray:
    """``alpha * op(a) @ op(b) + beta * c`` for 2-D ``a`` and ``b``."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ExecutionError(f"gemm needs 2-D operands, got {a.shape} and {b.shape}")
    out = _result_dtype(a, b)
    acc = accumulator_dtype(out)
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    y = np.matmul(a.astype(acc, copy=False), b.astype(acc, copy=False))
    if alpha != 1:
        y *= np.asarray(alpha).astype(acc)
    if c is not None and beta != 0:
        c = np.asarray(c).astype(acc, copy=False)
        scaled = c if beta == 1 else np.asarray(beta).astype(acc) * c
        if np.broadcast_shapes(y.shape, scaled.shape) == y.shape:
            y += scaled  # y is this call's own buffer
        else:
            y = y + scaled
    return downcast(y, out)


def einsum(equation: str, *operands: np.ndarray) -> np.ndarray:
    """numpy ``einsum`` (the ONNX ``Einsum`` grammar is numpy's), spaces allowed."""
    arrays = [np.asarray(x) for x in operands]
    out = _result_dtype(*arrays)
    acc = accumulator_dtype(out)
    y = np.einsum(equation.replace(" ", ""), *(x.astype(acc, copy=False) for x in arrays), optimize=True)
    return downcast(y, out)


def matmul_integer(a: np.ndarray, b: np.ndarray, a_zero_point=0, b_zero_point=0) -> np.ndarray:
    """``(a - a_zero_point) @ (b - b_zero_point)`` as int32 (ONNX ``MatMulInteger``)."""
    a = np.asarray(a).astype(np.int64)
    b = np.asarray(b).astype(np.int64)
    a_zp = np.asarray(a_zero_point, dtype=np.int64)
    b_zp = np.asarray(b_zero_point, dtype=np.int64)
    if a_zp.ndim == 1:  # one zero point per row of A
        a_zp = a_zp[:, None]
    return np.matmul(a - a_zp, b - b_zp).astype(np.int32)


def det(x: np.ndarray) -> np.ndarray:
    """Determinant of each square matrix in the last two dims (float32 stays float32)."""
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ExecutionError(f"det needs square matrices in the last two dims, got shape {list(x.shape)}")
    return downcast(np.linalg.det(upcast(x)), x.dtype)


def transpose(x: np.ndarray, perm: Sequence[int] | None = None) -> np.ndarray:
    """Transpose with ``perm`` (default: reverse the dims), negative entries allowed."""
    x = np.asarray(x)
    perm = None if perm is None else [p % x.ndim for p in perm]
    if perm is not None and (len(perm) != x.ndim or sorted(perm) != list(range(x.ndim))):
        raise ExecutionError(f"{list(perm)} is not a permutation of {x.ndim} dims")
    return np.transpose(x, perm)


def cholesky(x: np.ndarray, lower: bool = True) -> np.ndarray:
    """Cholesky factor of each matrix in the last two dims (XLA ``Cholesky``).

    ``lower``: ``L`` with ``x = L @ L^T``, read from the lower triangle of
    ``x``; otherwise ``U`` with ``x = U^T @ U``, read from the upper triangle.
    A matrix that is not positive definite gives NaNs (XLA leaves the result
    undefined; it does not fail).
    """
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ExecutionError(f"cholesky needs square matrices in the last two dims, got shape {list(x.shape)}")
    xc = upcast(x)
    source = xc if lower else np.swapaxes(xc, -1, -2)  # the upper triangle, read as a lower one
    batch = source.reshape((-1,) + x.shape[-2:])
    out = np.full(batch.shape, np.nan, dtype=xc.dtype)
    for i, matrix in enumerate(batch):
        # numpy's factorization reads the lower triangle only.
        try:
            out[i] = np.linalg.cholesky(np.tril(matrix) + np.tril(matrix, -1).swapaxes(-1, -2))
        except np.linalg.LinAlgError:
            pass
    out = out.reshape(x.shape)
    return downcast(out if lower else np.swapaxes(out, -1, -2), x.dtype)

"""opconv.kernels.linalg against onnxruntime (MatMul, Gemm, Einsum, MatMulInteger) and
dot_general against an element-by-element loop."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opconv.kernels import linalg as K

from .test_kernels_helpers import assert_close, rng, run_ort


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [
        ((3, 4), (4, 5)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((1, 3, 4), (2, 4, 6)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64])
def test_matmul_matches_ort(a_shape, b_shape, dtype):
    r = rng(1)
    a = (r.standard_normal(a_shape) * 4).astype(dtype)
    b = (r.standard_normal(b_shape) * 4).astype(dtype)
    (expected,) = run_ort("MatMul", [a, b], opset=13)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    assert_close(K.matmul(a, b), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("trans_a,trans_b", list(itertools.product([0, 1], repeat=2)))
@pytest.mark.parametrize("c_shape", [None, (), (5,), (3, 1), (3, 5)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0)])
def test_gemm_matches_ort(trans_a, trans_b, c_shape, alpha, beta):
    r = rng(2)
    a = r.standard_normal((4, 3) if trans_a else (3, 4)).astype(np.float32)
    b = r.standard_normal((5, 4) if trans_b else (4, 5)).astype(np.float32)
    c = None if c_shape is None else r.standard_normal(c_shape).astype(np.float32)
    attrs = {"alpha": alpha, "beta": beta, "transA": trans_a, "transB": trans_b}
    (expected,) = run_ort("Gemm", [a, b, c], attrs)
    assert_close(K.gemm(a, b, c, alpha, beta, bool(trans_a), bool(trans_b)), expected)


@pytest.mark.parametrize(
    "equation,shapes",
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
        ("ii->i", [(4, 4)]),
        ("ij->", [(3, 4)]),
        ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 2)]),
        ("abc,cd,be->ade", [(2, 3, 4), (4, 5), (3, 2)]),
        ("i,j", [(3,), (4,)]),
    ],
)
def test_einsum_matches_ort(equation, shapes):
    r = rng(3)
    operands = [r.standard_normal(s).astype(np.float32) for s in shapes]
    (expected,) = run_ort("Einsum", operands, {"equation": equation})
    assert_close(K.einsum(equation, *operands), expected)


@pytest.mark.parametrize("a_dtype,b_dtype", [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8)])
@pytest.mark.parametrize("per_column_b", [False, True])
def test_matmul_integer_matches_ort(a_dtype, b_dtype, per_column_b):
    r = rng(4)
    lo_a, hi_a = np.iinfo(a_dtype).min, np.iinfo(a_dtype).max
    lo_b, hi_b = np.iinfo(b_dtype).min, np.iinfo(b_dtype).max
    if (a_dtype, b_dtype) == (np.uint8, np.int8):
        # onnxruntime's u8 x s8 x86 kernel sums pairs of products in saturating
        # int16; keep |b| small enough that the oracle is exact.
        lo_b, hi_b = -64, 63
    a = r.integers(lo_a, hi_a, (2, 3, 4), endpoint=True).astype(a_dtype)
    b = r.integers(lo_b, hi_b, (4, 5), endpoint=True).astype(b_dtype)
    a_zp = np.array(3, a_dtype)
    b_zp = r.integers(lo_b, hi_b, (5,)).astype(b_dtype) if per_column_b else np.array(-1 if lo_b else 9, b_dtype)
    (expected,) = run_ort("MatMulInteger", [a, b, a_zp, b_zp])
    assert_close(K.matmul_integer(a, b, a_zp, b_zp), expected)


def slow_dot_general(lhs, rhs, lb, rb, lc, rc):
    lf = [d for d in range(lhs.ndim) if d not in lb + lc]
    rf = [d for d in range(rhs.ndim) if d not in rb + rc]
    shape = [lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf]
    out = np.zeros(shape)
    for index in itertools.product(*[range(s) for s in shape]):
        b_idx, rest = index[: len(lb)], index[len(lb) :]
        l_idx, r_idx = rest[: len(lf)], rest[len(lf) :]
        total = 0.0
        for c_idx in itertools.product(*[range(lhs.shape[d]) for d in lc]):
            li, ri = [0] * lhs.ndim, [0] * rhs.ndim
            for dims, vals, target in (
                (lb, b_idx, li),
                (lf, l_idx, li),
                (lc, c_idx, li),
                (rb, b_idx, ri),
                (rf, r_idx, ri),
                (rc, c_idx, ri),
            ):
                for d, v in zip(dims, vals):
                    target[d] = v
            total += float(lhs[tuple(li)]) * float(rhs[tuple(ri)])
        out[index] = total
    return out


@pytest.mark.parametrize(
    "lhs_shape,rhs_shape,lb,rb,lc,rc",
    [
        ((3, 4), (4, 5), [], [], [1], [0]),
        ((2, 3, 4), (2, 4, 5), [0], [0], [2], [1]),
        ((4, 2, 3), (5, 3, 2), [1], [2], [2], [1]),
        ((2, 3, 4, 5), (5, 2, 4, 6), [0], [1], [2, 3], [2, 0]),
        ((3, 2, 4), (4, 3), [], [], [], []),
        ((2, 3, 2, 4), (3, 4, 2, 2), [2, 1], [3, 0], [3], [1]),
        # the layouts taken straight to numpy: q k^T, an N-D lhs by a matrix (or its transpose), every dim
        # a batch dim (the element-wise product), a vector by a matrix
        ((2, 3, 4, 5), (2, 3, 6, 5), [0, 1], [0, 1], [3], [3]),
        ((2, 3, 4), (4, 5), [], [], [2], [0]),
        ((3, 4), (5, 4), [], [], [1], [1]),
        ((2, 3, 4), (2, 3, 4), [0, 1, 2], [0, 1, 2], [], []),
        ((4,), (4, 5), [], [], [0], [0]),
    ],
)
def test_dot_general_matches_loop(lhs_shape, rhs_shape, lb, rb, lc, rc):
    r = rng(5)
    lhs = r.standard_normal(lhs_shape).astype(np.float32)
    rhs = r.standard_normal(rhs_shape).astype(np.float32)
    expected = slow_dot_general(lhs, rhs, lb, rb, lc, rc).astype(np.float32)
    assert_close(K.dot_general(lhs, rhs, lb, rb, lc, rc), expected, rtol=1e-5, atol=1e-5)


def test_dot_general_int_is_exact():
    lhs = np.full((2, 3), 2**31, dtype=np.int64)
    rhs = np.full((3, 2), 3, dtype=np.int64)
    assert_close(K.dot_general(lhs, rhs, [], [], [1], [0]), np.full((2, 2), 9 * 2**31, dtype=np.int64))

"""Fit the polynomials of opconv's fast erf (``opconv/kernels/elementwise.py``) and print them.

    python scripts/fit_erf.py

Two pieces cover ``erf`` for float32 and narrower inputs, evaluated in float64:

* ``|x| < 1``: ``erf(x) = x * P(x**2)`` (``erf(x) / x`` is an even entire function);
* ``1 <= |x| < 3.92``: ``erfc(|x|) = exp(-x**2) * Q(1 / (1 + |x|))``; ``Q`` is the scaled
  complementary error function ``exp(x**2) * erfc(x)``, smooth and slowly varying in ``1 / (1 + x)``.

Beyond 3.92, ``erfc(x) < 2**-25`` so erf rounds to +-1 in float32.  Each piece is a weighted
least-squares Chebyshev fit of the relative error against ``math.erf`` / ``math.erfc`` (float64,
correctly rounded or nearly), converted to the monomial basis for Horner's rule; the script reports
the maximum relative error of that Horner evaluation on a dense grid.  A relative error below
``2**-25`` (3e-8) keeps every float32 result within 1 ulp of the true value; the fits reach ~1e-10.
"""

from __future__ import annotations

import math

import numpy as np

SMALL_LIMIT = 1.0
TAIL_LIMIT = 3.92
SMALL_DEGREE = 7
TAIL_DEGREE = 8


def _fit(variable, values, degree):
    """Monomial coefficients (highest first) of a relative-error least-squares fit."""
    series = np.polynomial.Chebyshev.fit(variable, values, degree, w=1 / np.abs(values))
    return series.convert(kind=np.polynomial.Polynomial).coef[::-1]


def _horner(coefficients, variable):
    result = np.full_like(variable, coefficients[0])
    for c in coefficients[1:]:
        result = result * variable + c
    return result


def fit():
    nodes = np.cos(np.pi * (np.arange(4000) + 0.5) / 4000) * 0.5 + 0.5  # Chebyshev nodes in [0, 1]
    x = nodes * SMALL_LIMIT
    small_values = np.array([math.erf(v) / v if v else 2 / math.sqrt(math.pi) for v in x])
    small = _fit(x * x, small_values, SMALL_DEGREE)
    a = SMALL_LIMIT + nodes * (TAIL_LIMIT - SMALL_LIMIT)
    tail_values = np.array([math.erfc(v) * math.exp(v * v) for v in a])
    tail = _fit(1 / (1 + a), tail_values, TAIL_DEGREE)
    return small, tail


def main():
    small, tail = fit()
    grid = np.linspace(0, TAIL_LIMIT, 200001)[1:]
    reference = np.array([math.erf(v) for v in grid])
    approx = np.where(
        grid < SMALL_LIMIT, grid * _horner(small, grid * grid), 1 - np.exp(-grid * grid) * _horner(tail, 1 / (1 + grid))
    )
    print("_ERF_SMALL = (" + ", ".join(repr(float(c)) for c in small) + ")")
    print("_ERFC_TAIL = (" + ", ".join(repr(float(c)) for c in tail) + ")")
    print(f"max relative error on [0, {TAIL_LIMIT}]: {np.max(np.abs(approx / reference - 1)):.3g}")


if __name__ == "__main__":
    main()

"""Comparing outputs: the one per-dtype tolerance table and the per-output comparison.

Used by ``opconv verify`` and by the conformance runs, so "equal" means the
same thing everywhere.  Integers, bools and strings compare exactly; floats
with ``|a - e| <= atol + rtol * |e|`` (NaN equals NaN, infinities must match).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: (rtol, atol) by element type; narrow floats get what their precision allows
TOLERANCE: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-3, 1e-4),
    "complex64": (1e-3, 1e-4),
    "complex128": (1e-7, 1e-9),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float8e4m3fn": (0.13, 1e-2),
    "float8e4m3fnuz": (0.13, 1e-2),
    "float8e5m2": (0.26, 1e-2),
    "float8e5m2fnuz": (0.26, 1e-2),
    "float8e8m0": (0.5, 0.0),
    "float4e2m1": (0.26, 0.5),
    "float6e2m3": (0.13, 0.1),
    "float6e3m2": (0.26, 0.1),
}


def tolerance(
    dtype: str, rtol: float | None = None, atol: float | None = None, precision: str | None = None
) -> tuple[float, float]:
    """The (rtol, atol) for ``dtype``, with explicit values taking precedence; exact (0, 0) for non-floats.

    ``precision`` is the float type a model computes in when narrower than its outputs (a float16 model with
    float32 inputs and outputs): a float output then defaults to that type's tolerance.
    """
    default = TOLERANCE.get(dtype, (0.0, 0.0))
    if precision in TOLERANCE and dtype in TOLERANCE and TOLERANCE[precision][0] > default[0]:
        default = TOLERANCE[precision]
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


@dataclass
class OutputComparison:
    """How one output of B compares with the same output of A."""

    name: str
    ok: bool
    expected_shape: tuple | None = None
    actual_shape: tuple | None = None
    expected_dtype: str | None = None
    actual_dtype: str | None = None
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    # the distribution of the errors over the finite elements
    mean_abs_error: float = 0.0
    median_abs_error: float = 0.0
    p99_abs_error: float = 0.0
    mean_rel_error: float = 0.0
    median_rel_error: float = 0.0
    p99_rel_error: float = 0.0
    mismatches: int = 0
    total: int = 0
    first_mismatch: tuple | None = None  # index of the first element outside tolerance
    expected_value: Any = None  # at first_mismatch
    actual_value: Any = None
    rtol: float = 0.0
    atol: float = 0.0
    message: str = ""

    def to_json(self) -> dict:
        out = asdict(self)
        for k in ("expected_value", "actual_value"):
            v = out[k]
            out[k] = v.item() if isinstance(v, np.generic) else v
            if isinstance(out[k], bytes):
                out[k] = out[k].decode("utf-8", "replace")
            if isinstance(out[k], float) and not np.isfinite(out[k]):
                out[k] = str(out[k])
        for k in ERROR_FIGURES:
            if not np.isfinite(out[k]):
                out[k] = str(out[k])
        return out


#: the error statistics of an OutputComparison
ERROR_FIGURES = tuple(f"{stat}_{kind}_error" for kind in ("abs", "rel") for stat in ("max", "mean", "median", "p99"))


def _dtype_name(a: np.ndarray) -> str:
    from .types import from_numpy

    try:
        return from_numpy(a.dtype).name
    except Exception:  # noqa: BLE001 - an unusual dtype is still reported by its numpy name
        return str(a.dtype)


def compare_arrays(
    name: str,
    expected: Any,
    actual: Any,
    rtol: float | None = None,
    atol: float | None = None,
    precision: str | None = None,
) -> OutputComparison:
    """Compare one output; sequences compare element by element, optionals by presence then value.

    ``precision``: the float type the model computes in, for the default tolerances (see :func:`tolerance`).
    """
    if isinstance(expected, (list, tuple)) or isinstance(actual, (list, tuple)):
        return _compare_sequences(name, expected, actual, rtol, atol, precision)
    if expected is None or actual is None:
        ok = expected is None and actual is None
        return OutputComparison(name, ok, message="" if ok else "one side is an empty optional")
    e, a = np.asarray(expected), np.asarray(actual)
    et, at = _dtype_name(e), _dtype_name(a)
    r, t = tolerance(et, rtol, atol, precision)
    report = OutputComparison(name, False, tuple(e.shape), tuple(a.shape), et, at, total=int(e.size), rtol=r, atol=t)
    if e.shape != a.shape:
        report.message = f"shape {list(a.shape)} differs from {list(e.shape)}"
        return report
    if et != at:
        report.message = f"element type {at} differs from {et}"
        return report
    if e.dtype == object or e.dtype.kind in "USb?iu" or (t == 0 and r == 0):
        bad = ~_exact_equal(e, a)
    else:
        ef, af = (
            e.astype(np.complex128 if e.dtype.kind == "c" else np.float64),
            a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
        )
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(af - ef)
            both_nan = np.isnan(ef) & np.isnan(af)
            same_inf = np.isinf(ef) & (ef == af)
            bad = ~(both_nan | same_inf | (diff <= t + r * np.abs(ef)))
            finite = np.isfinite(diff)
            if finite.any():
                absolute = diff[finite]
                rel = absolute / np.maximum(np.abs(ef[finite]), np.finfo(np.float64).tiny)
                for kind, errors in (("abs", absolute), ("rel", rel)):
                    median, p99 = np.percentile(errors, (50, 99))
                    setattr(report, f"max_{kind}_error", float(errors.max()))
                    setattr(report, f"mean_{kind}_error", float(errors.mean()))
                    setattr(report, f"median_{kind}_error", float(median))
                    setattr(report, f"p99_{kind}_error", float(p99))
    report.mismatches = int(bad.sum())
    report.ok = report.mismatches == 0
    if not report.ok:
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
        report.first_mismatch = idx
        report.expected_value = e[idx] if idx or e.ndim == 0 else e
        report.actual_value = a[idx] if idx or a.ndim == 0 else a
        report.message = (
            f"{report.mismatches} of {report.total} elements differ; first at {list(idx)}: "
            f"{_show(report.actual_value)} vs {_show(report.expected_value)} expected"
        )
    return report


def _show(v: Any) -> str:
    return repr(v.item()) if isinstance(v, np.generic) else repr(v)


def _exact_equal(e: np.ndarray, a: np.ndarray) -> np.ndarray:
    if e.dtype.kind in "fc" or e.dtype.kind == "V":
        return (e == a) | (_isnan(e) & _isnan(a))
    return np.asarray(e == a)


def _isnan(x: np.ndarray) -> np.ndarray:
    try:
        return np.isnan(x.astype(np.float64))
    except (TypeError, ValueError):
        return np.zeros(x.shape, bool)


def _compare_sequences(name, expected, actual, rtol, atol, precision) -> OutputComparison:
    if not isinstance(expected, (list, tuple)) or not isinstance(actual, (list, tuple)):
        return OutputComparison(name, False, message="one side is a sequence, the other is not")
    if len(expected) != len(actual):
        return OutputComparison(name, False, message=f"sequence length {len(actual)} differs from {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual)):
        sub = compare_arrays(f"{name}[{i}]", e, a, rtol, atol, precision)
        if not sub.ok:
            sub.name = name
            sub.message = f"element {i}: {sub.message}"
            return sub
    return OutputComparison(name, True, total=len(expected))

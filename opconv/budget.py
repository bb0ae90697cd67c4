"""Size budgets: a tiny hostile model must not make opconv allocate, compute or write terabytes.

One budget, :func:`max_bytes` (default 4 GiB, ``OPCONV_MAX_TENSOR_BYTES`` or the CLI's
``--max-tensor-bytes`` raise it), bounds every tensor opconv makes whose size comes from the model's
data or declarations: a kernel's output shaped by a value (Range, ConstantOfShape, Expand, Tile,
Resize, Pad ...), a random input for a declared shape, a constant written to a weights file.  The
logical size counts, so a broadcast view of 10**12 elements is refused although it takes no memory:
the next kernel would compute over all of them.  Constant folding has a smaller budget,
:func:`fold_bytes` (default 512 MiB, ``OPCONV_MAX_FOLD_BYTES``): a larger value is left for run time
instead of being computed while converting.

A refusal is a :class:`~opconv.errors.BudgetError` that names the budget and how to raise it.
"""

from __future__ import annotations

import math
import os

from .errors import BudgetError, OpconvError

MAX_BYTES_VARIABLE = "OPCONV_MAX_TENSOR_BYTES"
FOLD_BYTES_VARIABLE = "OPCONV_MAX_FOLD_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
DEFAULT_FOLD_BYTES = 512 << 20
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, what: str) -> int:
    """``"4G"``, ``"512m"``, ``"1000000"`` -> bytes."""
    s = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = s[-1:] if s[-1:] in _UNITS else ""
    try:
        value = float(s[: len(s) - len(unit)]) * _UNITS[unit]
    except ValueError:
        value = -1
    if not value > 0 or value != value or value > 1 << 62:
        raise OpconvError(f"{what} {text!r} is not a size in bytes (e.g. 8G, 512M, 1000000)")
    return int(value)


_cli_max_bytes: int | None = None  # --max-tensor-bytes of the command being run


def _from_environment(variable: str, default: int) -> int:
    text = os.environ.get(variable)
    return parse_size(text, variable) if text else default


def max_bytes() -> int:
    if _cli_max_bytes is not None:
        return _cli_max_bytes
    return _from_environment(MAX_BYTES_VARIABLE, DEFAULT_MAX_BYTES)


def fold_bytes() -> int:
    return min(_from_environment(FOLD_BYTES_VARIABLE, DEFAULT_FOLD_BYTES), max_bytes())


def set_max_bytes(text: str | None) -> None:
    """What ``--max-tensor-bytes`` does (None: back to the environment's or the default budget)."""
    global _cli_max_bytes
    _cli_max_bytes = None if text is None else parse_size(text, "--max-tensor-bytes")


def elements(shape) -> int:
    """The number of elements of ``shape`` as a Python int (no int64 overflow)."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


def check(shape, itemsize: int, what: str, where: str | None = None) -> None:
    """Refuse to make ``what`` of ``shape`` when it is over the tensor budget (or has a negative dim)."""
    if any(int(d) < 0 for d in shape):
        raise BudgetError(f"{what} would have a negative dimension: {list(map(int, shape))}", where=where)
    span = max(int(itemsize), 1)  # numpy refuses a shape whose non-zero dims overflow its index type, even empty
    for d in shape:
        span *= max(int(d), 1)
    if span >= 1 << 63:
        raise BudgetError(f"{what} would have a shape no array can hold: {list(map(int, shape))}", where=where)
    check_bytes(elements(shape) * max(int(itemsize), 1), f"{what} (shape {list(map(int, shape))})", where)


def check_count(count: int, itemsize: int, what: str, where: str | None = None) -> None:
    check((count,), itemsize, what, where)


def check_range(start, limit, delta, itemsize: int, where: str | None = None) -> None:
    """Refuse a Range of constants whose length is over the budget (delta 0 or not finite: refused too)."""
    start, limit, delta = (x.item() if hasattr(x, "item") else x for x in (start, limit, delta))
    if delta == 0 or not all(math.isfinite(x) for x in (start, limit, delta)):
        raise BudgetError(f"a Range from {start} to {limit} by {delta} has no finite length", where=where)
    if all(isinstance(x, int) for x in (start, limit, delta)):
        count = max(-(-(limit - start) // delta), 0)
    else:
        count = max(math.ceil((limit - start) / delta), 0)
    check_count(count, itemsize, "Range's output", where)


def check_bytes(size: int, what: str, where: str | None = None) -> None:
    limit = max_bytes()
    if size > limit:
        raise BudgetError(
            f"{what} would be {_human(size)}, over the tensor budget of {_human(limit)}; "
            f"raise it with --max-tensor-bytes or {MAX_BYTES_VARIABLE}",
            where=where,
        )


def too_large_to_fold(arrays) -> bool:
    """Whether a step reading ``arrays`` is over the folding budget (counted by their logical size)."""
    limit = fold_bytes()
    for a in arrays:
        size = getattr(a, "size", None)
        if size is not None and size * getattr(getattr(a, "dtype", None), "itemsize", 1) > limit:
            return True
    return False


def _human(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"

"""The ``computation`` enum of ReduceWindow, ScatterND and SelectAndScatter as binary functions.

Where XLA takes a region, the dialect names the combiner: ``f(accumulator,
value)`` is folded over the elements in order, starting from the init value
(reductions) or the existing element (scatters).  ``SUB``/``DIV`` are
``accumulator - value`` / ``accumulator / value`` (integer division truncates,
as StableHLO's ``divide``); ``AND``/``OR``/``XOR`` are logical on booleans and
bitwise on integers; ``L2`` folds to ``sqrt(acc**2 + value**2)`` (so from 0 it
is the Euclidean norm); ``COUNT`` adds one per element; ``UPDATE`` keeps the
newest value.  ``ARGMIN``/``ARGMAX`` select rather than combine and are
handled by the ops that allow them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....errors import ExecutionError
from ....kernels.elementwise import int_div

_BITWISE = {
    "AND": (np.logical_and, np.bitwise_and),
    "OR": (np.logical_or, np.bitwise_or),
    "XOR": (np.logical_xor, np.bitwise_xor),
}


def _divide(acc, value):
    return int_div(acc, value, "trunc") if np.asarray(acc).dtype.kind in "iu" else acc / value


def _count(acc, value):
    return acc + np.ones((), dtype=np.asarray(acc).dtype)


def _update(acc, value):
    return value


_COMBINERS: dict[str, Callable] = {
    "ADD": np.add,
    "SUB": np.subtract,
    "MUL": np.multiply,
    "DIV": _divide,
    "MIN": np.minimum,
    "MAX": np.maximum,
    "L2": np.hypot,
    "COUNT": _count,
    "UPDATE": _update,
}


def combiner(computation: str, dtype, where: str = "") -> Callable:
    """The binary function ``computation`` names, for elements of ``dtype``."""
    name = str(computation).upper()
    if name in _BITWISE:
        logical, bitwise = _BITWISE[name]
        return logical if np.dtype(dtype) == np.bool_ else bitwise
    if name in _COMBINERS:
        return _COMBINERS[name]
    raise ExecutionError(f"computation {computation!r} cannot combine elements here", where=where or None)

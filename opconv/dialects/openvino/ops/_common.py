"""Helpers shared by the opset1 kernels: broadcasting rules, input-borne integers, auto_pad."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....errors import ExecutionError
from ....kernels import conv as conv_kernels


def broadcast(auto_broadcast: str | None, *arrays: np.ndarray) -> list[np.ndarray]:
    """The arrays of an element-wise op, checked against its ``auto_broadcast`` rule.

    ``none`` demands identical shapes; ``numpy`` is numpy's rule; ``pdpd``
    broadcasts the later inputs into the first one's shape (the first input
    never grows).
    """
    arrays = [np.asarray(a) for a in arrays]
    mode = (auto_broadcast or "numpy").lower()
    if mode == "none":
        if any(a.shape != arrays[0].shape for a in arrays):
            raise ExecutionError(
                f"auto_broadcast 'none' needs equal shapes, got {', '.join(str(list(a.shape)) for a in arrays)}"
            )
        return arrays
    if mode == "numpy":
        return arrays
    if mode == "pdpd":
        target = arrays[0].shape
        return [arrays[0]] + [np.broadcast_to(a, target) for a in arrays[1:]]
    raise ExecutionError(f"unknown auto_broadcast mode {auto_broadcast!r}")


def ints(x) -> list[int]:
    """An input tensor holding integers (axes, shapes, pads) as a Python list."""
    return [int(v) for v in np.asarray(x).reshape(-1)]


def scalar(x) -> int:
    """A scalar (or one-element) integer input."""
    values = ints(x)
    if len(values) != 1:
        raise ExecutionError(f"expected a scalar, got {len(values)} values")
    return values[0]


def axes_of(x, rank: int) -> list[int]:
    """Axes from an input tensor, negative ones counted from the end."""
    out = []
    for a in ints(x):
        if not -rank <= a < rank:
            raise ExecutionError(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    return out


def explicit_pads(
    auto_pad: str | None, spatial: Sequence[int], kernel: Sequence[int], strides, dilations, pads_begin, pads_end
) -> tuple[list[int], list[int]]:
    """Explicit pads for an ``auto_pad`` mode (``explicit`` keeps the layer's pads, ``valid`` is zeros)."""
    mode = (auto_pad or "explicit").lower()
    n = len(spatial)
    if mode in ("explicit", "notset"):
        return list(pads_begin or [0] * n), list(pads_end or [0] * n)
    return conv_kernels.auto_pad(spatial, kernel, strides, dilations, mode)

"""Helpers shared by the ONNX op modules."""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError


def legacy_broadcast(a: np.ndarray, b: np.ndarray, broadcast: int | None, axis: int | None) -> np.ndarray:
    """``b`` aligned to ``a`` the pre-opset-7 way: with ``broadcast=1``, b's dims match a's from ``axis``.

    (Opset 7 replaced this with numpy-style broadcasting; without ``broadcast`` the shapes must agree.)
    """
    a, b = np.asarray(a), np.asarray(b)
    if not broadcast:
        if a.shape != b.shape:
            raise ExecutionError(f"shapes {a.shape} and {b.shape} differ and broadcast is not set")
        return b
    if b.ndim == 0 or b.shape == a.shape:
        return b
    if axis is None:
        axis = a.ndim - b.ndim  # suffix matching
    axis = axis + a.ndim if axis < 0 else axis
    shape = [1] * a.ndim
    shape[axis : axis + b.ndim] = b.shape
    return b.reshape(shape)

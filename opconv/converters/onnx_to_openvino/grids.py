"""AffineGrid -> opset1: a constant grid of normalised positions times each batch's affine matrix.

With the output size static, the homogeneous positions ``(x, y[, z], 1)`` of every output element form a
constant ``[P, k+1]`` matrix; the grid is that matrix times ``theta`` transposed, one MatMul for the batch.
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const_input, i64, np_dtype, ov, static_shape


def _positions(n: int, align_corners: bool) -> np.ndarray:
    """Normalised coordinates in [-1, 1] of ``n`` samples: pixel centres, or the corners when aligned."""
    i = np.arange(n, dtype=np.float64)
    if align_corners:
        return -1.0 + 2.0 * i / (n - 1) if n > 1 else np.full(1, -1.0)
    return (2.0 * i + 1.0) / n - 1.0


@lower("onnx", "openvino", "AffineGrid", inputs=2, names=("theta", "size"))
def _affine_grid(b, m):
    theta = m["theta"]
    batch, k, k1 = static_shape(theta)
    size = [int(d) for d in const_input(m, "size", "the output size").reshape(-1)]
    spatial = size[2:]
    if len(spatial) != k or k1 != k + 1 or size[0] != batch:
        raise Refuse(f"theta {[batch, k, k1]} does not fit the output size {size}")
    aligned = bool(attr(m.root, "align_corners", 0))
    axes = np.meshgrid(*[_positions(n, aligned) for n in spatial], indexing="ij")
    # The homogeneous vector lists the innermost axis (x = width) first.
    homogeneous = np.stack([a.reshape(-1) for a in reversed(axes)] + [np.ones(int(np.prod(spatial)))], axis=1)
    base = b.const(homogeneous[None].astype(np_dtype(theta)), "positions")
    grid = ov(b, "MatMul", base, theta, transpose_a=False, transpose_b=True)
    return ov(b, "Reshape", grid, i64(b, [batch, *spatial, k], "grid_shape"), special_zero=False)

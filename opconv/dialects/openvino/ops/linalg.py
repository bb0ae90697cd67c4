"""MatMul with transpose_a / transpose_b and the 1-D rules."""

from __future__ import annotations

import numpy as np

from ....kernels import linalg
from ..executor import ov_op


def _transposed(x: np.ndarray, flag: bool) -> np.ndarray:
    # A 1-D operand is never transposed: it becomes a row (a) or column (b) vector whatever the flag.
    return np.swapaxes(x, -1, -2) if flag and x.ndim >= 2 else x


@ov_op("MatMul")
def matmul(ctx, a, b, *, transpose_a=False, transpose_b=False):
    return linalg.matmul(_transposed(np.asarray(a), transpose_a), _transposed(np.asarray(b), transpose_b))

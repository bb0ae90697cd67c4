"""Optional values: Optional, OptionalGetElement, OptionalHasElement.

At run time an empty optional is ``None`` and an optional holding a value is
that value itself (an array, or a list for a sequence).  So an optional and
the plain tensor/sequence it wraps look the same, which is exactly what
opset 18 allows (OptionalGetElement/OptionalHasElement accept plain tensors
and sequences there); opset 15 restricted the input *type* to optionals, a
static property the checker enforces, so every version shares one kernel.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ..executor import onnx_op


@onnx_op("Optional", since=[15, 28])
def optional_15(ctx, input=None, *, type):
    # Without an input the result is an empty optional of `type` (a static type only; nothing to store).
    return input


@onnx_op("OptionalGetElement", since=[15, 18, 28])
def optional_get_element_15(ctx, input=None):
    if input is None:
        raise ExecutionError("OptionalGetElement of an empty optional")
    return input


@onnx_op("OptionalHasElement", since=[15, 18, 28])
def optional_has_element_15(ctx, input=None):
    return np.array(input is not None)

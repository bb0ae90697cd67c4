"""Shape and data-movement ONNX ops, pass-through ops and constants."""

from __future__ import annotations

import numpy as np

from ...ir import Tensor
from ...types import from_onnx_code
from ..lowering import lower
from ._common import Refuse, attr, const_input, constant_list, i64, ov, rank_of, static_shape, variadic_inputs


@lower("onnx", "openvino", "Reshape", inputs=1, names=("x",))
def _reshape_1(b, m):
    return _reshape_to(b, m, np.asarray(attr(m.root, "shape", []), dtype=np.int64))


@lower("onnx", "openvino", "Reshape", since=5, inputs=2, names=("x", "shape"))
def _reshape_5(b, m):
    out = m.root.outputs[0].shape
    if m.constant("shape") is None and out is not None and all(isinstance(d, int) and d > 0 for d in out):
        # A target computed from shapes that folding resolved only after re-inference: the inferred output
        # shape is that target.
        return ov(b, "Reshape", m["x"], i64(b, out, "shape"), special_zero=False)
    return _reshape_to(b, m, np.asarray(const_input(m, "shape", "the target shape"), dtype=np.int64))


def _reshape_to(b, m, shape: np.ndarray):
    if attr(m.root, "allowzero", 0) and (shape == 0).any():
        raise Refuse("allowzero=1 with a 0 in the shape (an empty dim) has no special_zero equivalent")
    return ov(b, "Reshape", m["x"], i64(b, shape, "shape"), special_zero=True)


@lower("onnx", "openvino", "Flatten", inputs=1, names=("x",))
def _flatten(b, m):
    shape = static_shape(m["x"])
    axis = int(attr(m.root, "axis", 1))
    if axis < 0:
        axis += len(shape)  # ONNX allows [-r, r]; -1 splits before the last axis
    target = [int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))]
    return ov(b, "Reshape", m["x"], i64(b, target, "shape"), special_zero=False)


@lower("onnx", "openvino", "Transpose", inputs=1, names=("x",))
def _transpose(b, m):
    rank = rank_of(m["x"])
    perm = attr(m.root, "perm") or list(reversed(range(rank)))
    return ov(b, "Transpose", m["x"], i64(b, perm, "perm"))


@lower("onnx", "openvino", "Concat", inputs=None)
def _concat(b, m):
    inputs = variadic_inputs(m)
    axis = int(attr(m.root, "axis", 0))
    if axis < 0:
        axis += rank_of(inputs[0])
    # Inputs of static length 0 along the axis (opset1 cannot hold them) add nothing.
    inputs = [v for v in inputs if v.shape is None or v.shape[axis] != 0] or inputs
    return ov(b, "Concat", *inputs, axis=axis)


@lower("onnx", "openvino", ("Squeeze", "Unsqueeze"), inputs=1, names=("x",))
def _axes_attribute(b, m):
    """Squeeze/Unsqueeze before opset 13: the axes attribute."""
    return _AXES_OPS[m.root.op](b, m, attr(m.root, "axes"))


@lower("onnx", "openvino", ("Squeeze", "Unsqueeze"), since=13, inputs=(1, 2), names=("x", "axes"))
def _axes_input(b, m):
    """Squeeze/Unsqueeze from opset 13: the axes input."""
    return _AXES_OPS[m.root.op](b, m, constant_list(m, "axes"))


def _squeeze(b, m, axes):
    """Squeeze ``axes``, or (None) every static dim of 1."""
    rank = rank_of(m["x"])
    if axes is None:
        axes = [i for i, d in enumerate(static_shape(m["x"])) if d == 1]
    return ov(b, "Squeeze", m["x"], i64(b, sorted(int(a) % rank for a in axes), "axes"))


def _unsqueeze(b, m, axes):
    rank = rank_of(m["x"])
    if not axes:
        raise Refuse("Unsqueeze needs axes")
    rank_after = rank + len(axes)
    return ov(b, "Unsqueeze", m["x"], i64(b, sorted(int(a) % rank_after for a in axes), "axes"))


_AXES_OPS = {"Squeeze": _squeeze, "Unsqueeze": _unsqueeze}


@lower("onnx", "openvino", "Identity", inputs=1, names=("x",))
@lower("onnx", "openvino", "Dropout", inputs=(1, 2, 3), names=("x", "ratio", "training"))
def _pass_through(b, m):
    """Inference-time Identity/Dropout: consumers read the input directly."""
    mode = m.values.get("training")
    if mode is not None:
        flag = m.constant("training")
        if flag is None or bool(np.asarray(flag).reshape(-1)[0]):
            raise Refuse("Dropout in training mode (or with a computed training_mode) is not an identity")
    return m["x"]


# ONNX Constant's value attributes -> how to make the array.
_CONSTANT_VALUES = {
    "value": lambda v: v.numpy() if isinstance(v, Tensor) else np.asarray(v),
    "value_float": lambda v: np.asarray(v, np.float32),
    "value_floats": lambda v: np.asarray(v, np.float32),
    "value_int": lambda v: np.asarray(v, np.int64),
    "value_ints": lambda v: np.asarray(v, np.int64),
}


@lower("onnx", "openvino", "Constant", inputs=0)
def _constant(b, m):
    for name, make in _CONSTANT_VALUES.items():
        value = m.root.attr(name)
        if value is not None:
            return b.const(make(value), m.root.outputs[0].name)
    raise Refuse(f"Constant with {', '.join(m.root.attrs) or 'no'} attribute is not supported")


@lower("onnx", "openvino", "Cast", inputs=1, names=("x",))
def _cast(b, m):
    code = int(attr(m.root, "to", 0))
    try:
        target = from_onnx_code(code).name
    except Exception:  # an unknown code: say which, instead of failing the whole conversion
        raise Refuse(f"Cast to ONNX element type code {code} is not supported") from None
    return ov(b, "Convert", m["x"], destination_type=target)


@lower("onnx", "openvino", "CastLike", inputs=2, names=("x", "like"))
def _cast_like(b, m):
    target = m["like"].dtype
    if target is None:
        raise Refuse(f"the element type of {m['like'].name!r} is unknown")
    return ov(b, "Convert", m["x"], destination_type=target)

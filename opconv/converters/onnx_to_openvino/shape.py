"""Shape and data-movement ONNX ops, pass-through ops and constants."""

from __future__ import annotations

import numpy as np

from ...ir import Tensor
from ...types import from_onnx_code
from ._common import Refuse, Rule, attr, const_input, i64, ov, pattern, rank_of, variadic_rule, static_shape

MAX_CONCAT_INPUTS = 64  # Concat is variadic; one pattern per input count up to this


def _reshape(b, m):
    node = m.root
    if node.version is not None and node.version < 5:
        shape = np.asarray(attr(node, "shape", []), dtype=np.int64)
    else:
        out = node.outputs[0].shape
        if m.constant("shape") is None and out is not None and all(isinstance(d, int) and d > 0 for d in out):
            # A target computed from shapes that folding resolved only after re-inference: the inferred output
            # shape is that target.
            return ov(b, "Reshape", m["x"], i64(b, out, "shape"), special_zero=False)
        shape = np.asarray(const_input(m, "shape", "the target shape"), dtype=np.int64)
    if attr(node, "allowzero", 0) and (shape == 0).any():
        raise Refuse("allowzero=1 with a 0 in the shape (an empty dim) has no special_zero equivalent")
    return ov(b, "Reshape", m["x"], i64(b, shape, "shape"), special_zero=True)


def _flatten(b, m):
    shape = static_shape(m["x"])
    axis = int(attr(m.root, "axis", 1))
    if axis < 0:
        axis += len(shape)  # ONNX allows [-r, r]; -1 splits before the last axis
    target = [int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))]
    return ov(b, "Reshape", m["x"], i64(b, target, "shape"), special_zero=False)


def _transpose(b, m):
    rank = rank_of(m["x"])
    perm = attr(m.root, "perm") or list(reversed(range(rank)))
    return ov(b, "Transpose", m["x"], i64(b, perm, "perm"))


def _concat(b, m):
    inputs = [v for v in m.root.inputs if v is not None]
    axis = int(attr(m.root, "axis", 0))
    if axis < 0:
        axis += rank_of(inputs[0])
    # Inputs of static length 0 along the axis (opset1 cannot hold them) add nothing.
    inputs = [v for v in inputs if v.shape is None or v.shape[axis] != 0] or inputs
    return ov(b, "Concat", *inputs, axis=axis)


def _axes(m, name: str, rank_after: int) -> list[int] | None:
    """Squeeze/Unsqueeze axes: the attribute before opset 13, the constant input from 13; non-negative."""
    if m.root.version is not None and m.root.version < 13:
        axes = attr(m.root, "axes")
    else:
        axes = None if m.values.get(name) is None else const_input(m, name, "axes").tolist()
    if axes is None:
        return None
    return sorted(int(a) % rank_after for a in np.asarray(axes).reshape(-1))


def _squeeze(b, m):
    axes = _axes(m, "axes", rank_of(m["x"]))
    if axes is None:
        shape = static_shape(m["x"])
        axes = [i for i, d in enumerate(shape) if d == 1]
    return ov(b, "Squeeze", m["x"], i64(b, axes, "axes"))


def _unsqueeze(b, m):
    rank = rank_of(m["x"])
    raw = attr(m.root, "axes") if (m.root.version or 13) < 13 else None
    count = len(raw) if raw is not None else (
        np.asarray(const_input(m, "axes", "axes")).size if m.values.get("axes") is not None else 0)
    axes = _axes(m, "axes", rank + count)
    if not axes:
        raise Refuse("Unsqueeze needs axes")
    return ov(b, "Unsqueeze", m["x"], i64(b, axes, "axes"))


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


def _constant(b, m):
    for name, make in _CONSTANT_VALUES.items():
        value = m.root.attr(name)
        if value is not None:
            return b.const(make(value), m.root.outputs[0].name)
    raise Refuse(f"Constant with {', '.join(m.root.attrs) or 'no'} attribute is not supported")


def _cast(b, m):
    code = int(attr(m.root, "to", 0))
    try:
        target = from_onnx_code(code).name
    except Exception:  # an unknown code: say which, instead of failing the whole conversion
        raise Refuse(f"Cast to ONNX element type code {code} is not supported") from None
    return ov(b, "Convert", m["x"], destination_type=target)


def _cast_like(b, m):
    target = m["like"].dtype
    if target is None:
        raise Refuse(f"the element type of {m['like'].name!r} is unknown")
    return ov(b, "Convert", m["x"], destination_type=target)


RULES = [
    Rule("Reshape-to-Reshape", pattern("Reshape", ["x", "shape"]), _reshape),
    Rule("Reshape1-to-Reshape", pattern("Reshape", ["x"], _version=lambda v: v is not None and v < 5), _reshape),
    Rule("Flatten-to-Reshape", pattern("Flatten", ["x"]), _flatten),
    Rule("Transpose-to-Transpose", pattern("Transpose", ["x"]), _transpose),
    variadic_rule("Concat-to-Concat", "Concat", _concat, range(1, MAX_CONCAT_INPUTS + 1)),
    Rule("Squeeze-to-Squeeze", pattern("Squeeze", ["x"]), _squeeze),
    Rule("Squeeze-axes-to-Squeeze", pattern("Squeeze", ["x", "axes"]), _squeeze),
    Rule("Unsqueeze-to-Unsqueeze", pattern("Unsqueeze", ["x"]), _unsqueeze),
    Rule("Unsqueeze-axes-to-Unsqueeze", pattern("Unsqueeze", ["x", "axes"]), _unsqueeze),
    Rule("Identity-removed", pattern("Identity", ["x"]), _pass_through),
    Rule("Dropout-removed", pattern("Dropout", ["x"]), _pass_through),
    Rule("Dropout-ratio-removed", pattern("Dropout", ["x", "ratio"]), _pass_through),
    Rule("Dropout-mode-removed", pattern("Dropout", ["x", "ratio", "training"]), _pass_through),
    Rule("Constant-to-Const", pattern("Constant", []), _constant),
    Rule("Cast-to-Convert", pattern("Cast", ["x"]), _cast),
    Rule("CastLike-to-Convert", pattern("CastLike", ["x", "like"]), _cast_like),
]

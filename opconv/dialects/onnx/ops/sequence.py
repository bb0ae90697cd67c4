"""Tensor sequences: SequenceConstruct/Empty/At/Insert/Erase/Length, SplitToSequence, ConcatFromSequence.

A sequence value is a Python ``list`` of numpy arrays.  Kernels never mutate
an input list (a sequence may feed several nodes): each returns a new list.
Positions follow ONNX's convention: negative counts from the back, and an
out-of-range position is an error, not a clamp.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels._common import normalize_axis
from ..executor import onnx_op


def _position(position, n: int, *, inserting: bool = False) -> int:
    """A scalar position tensor as an index in ``[0, n)`` (``[0, n]`` when inserting)."""
    p = int(np.asarray(position).reshape(()))
    high = n if inserting else n - 1
    if not -n <= p <= high:
        raise ExecutionError(f"position {p} is out of range [{-n}, {high}] for a sequence of {n} tensors")
    return p + n if p < 0 else p


def _check_sequence(seq, what: str = "input_sequence") -> list:
    if not isinstance(seq, (list, tuple)):
        raise ExecutionError(f"{what} must be a sequence, got {type(seq).__name__}")
    return list(seq)


@onnx_op("SequenceConstruct", since=11)
def sequence_construct_11(ctx, *inputs):
    return [np.asarray(x) for x in inputs]


@onnx_op("SequenceEmpty", since=11)
def sequence_empty_11(ctx, *, dtype):
    # The element type (default float) only matters to type inference: the runtime value is an empty list.
    return []


@onnx_op("SequenceAt", since=11)
def sequence_at_11(ctx, input_sequence, position):
    seq = _check_sequence(input_sequence)
    return seq[_position(position, len(seq))]


@onnx_op("SequenceInsert", since=11)
def sequence_insert_11(ctx, input_sequence, tensor, position=None):
    seq = _check_sequence(input_sequence)
    at = len(seq) if position is None else _position(position, len(seq), inserting=True)
    return seq[:at] + [np.asarray(tensor)] + seq[at:]


@onnx_op("SequenceErase", since=11)
def sequence_erase_11(ctx, input_sequence, position=None):
    seq = _check_sequence(input_sequence)
    if not seq:
        raise ExecutionError("cannot erase from an empty sequence")
    at = len(seq) - 1 if position is None else _position(position, len(seq))
    return seq[:at] + seq[at + 1 :]


@onnx_op("SequenceLength", since=11)
def sequence_length_11(ctx, input_sequence):
    return np.array(len(_check_sequence(input_sequence)), dtype=np.int64)


@onnx_op("SplitToSequence", since=[11, 24])
def split_to_sequence_11(ctx, input, split=None, *, axis, keepdims):
    x = np.asarray(input)
    axis = normalize_axis(axis, x.ndim)
    size = x.shape[axis]
    if split is None:
        # Pieces of length 1; keepdims decides whether the split axis survives (only in this form).
        pieces = np.split(x, size, axis=axis)
        return pieces if keepdims else [np.squeeze(p, axis=axis) for p in pieces]
    split = np.asarray(split).astype(np.int64)
    if (split < 0).any():
        raise ExecutionError(f"split values must be >= 0, got {split.tolist()}")
    if split.ndim == 0:
        chunk = int(split)
        if chunk <= 0:
            raise ExecutionError(f"a scalar split must be positive, got {chunk}")
        # Equal chunks of `chunk`; the last one takes the remainder.
        bounds = list(range(chunk, size, chunk))
    else:
        if int(split.sum()) != size:
            raise ExecutionError(f"split {split.tolist()} sums to {int(split.sum())}, the axis has {size}")
        bounds = np.cumsum(split)[:-1].tolist()
    return np.split(x, bounds, axis=axis)


@onnx_op("ConcatFromSequence", since=11)
def concat_from_sequence_11(ctx, input_sequence, *, axis, new_axis):
    seq = _check_sequence(input_sequence)
    if not seq:
        raise ExecutionError("cannot concatenate an empty sequence")
    rank = np.ndim(seq[0])
    if new_axis:
        return np.stack(seq, axis=normalize_axis(axis, rank + 1))
    return np.concatenate(seq, axis=normalize_axis(axis, rank))

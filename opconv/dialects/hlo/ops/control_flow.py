"""Regions and tuples: If, While, Map, Tuple, GetTupleElement, and CustomCall (which cannot run).

A region is a :class:`~opconv.ir.Graph` whose inputs are its parameters and
whose outputs are its results; it may read values of the enclosing graph.
A tuple is a Python list of values at run time.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....types import TensorType
from ..executor import hlo_op
from . import elementwise, logic
from .shape import result_dtype


def _scalar_bool(value, what: str) -> bool:
    value = np.asarray(value)
    if value.size != 1:
        raise ExecutionError(f"{what} must be a scalar boolean, got shape {list(value.shape)}")
    return bool(value.reshape(()))


@hlo_op("If")
def if_(ctx, pred, *, true_branch, false_branch):
    branch = true_branch if _scalar_bool(pred, "If's pred") else false_branch
    if branch is None:
        raise ExecutionError("If needs both true_branch and false_branch regions")
    return tuple(ctx.run_graph(branch, []))


@hlo_op("While")
def while_(ctx, *carried, cond, body):
    if cond is None or body is None:
        raise ExecutionError("While needs cond and body regions")
    values = list(carried)
    while _scalar_bool(ctx.run_graph(cond, values)[0], "While's cond result"):
        values = ctx.run_graph(body, values)
        if len(values) != len(carried):
            raise ExecutionError(f"While body returns {len(values)} values for {len(carried)} loop-carried values")
    return tuple(values)


@hlo_op("Tuple")
def tuple_(ctx, *elements):
    return list(elements)


@hlo_op("GetTupleElement")
def get_tuple_element(ctx, value, *, index):
    if not isinstance(value, (list, tuple)):
        raise ExecutionError(f"GetTupleElement needs a tuple operand, got {type(value).__name__}")
    if not 0 <= int(index) < len(value):
        raise ExecutionError(f"tuple index {index} is out of range for a tuple of {len(value)} elements")
    return value[int(index)]


# Region bodies made only of these ops give, run once on whole arrays, what they give element by element.
_VECTORIZABLE = elementwise.ELEMENTWISE_OPS | logic.ELEMENTWISE_OPS | {"Constant", "Copy", "Tuple", "GetTupleElement"}


@hlo_op("Map")
def map_(ctx, *inputs, dimensions, computation):
    """Apply the scalar computation to every element position of the (equal-shaped) inputs.

    A body of element-wise ops only (the usual case) runs once on the whole
    arrays; any other body (shape queries, control flow...) runs per element.
    """
    if not inputs:
        raise ExecutionError("Map needs at least one input")
    shape = inputs[0].shape
    if any(x.shape != shape for x in inputs):
        raise ExecutionError(f"Map inputs must share one shape, got {[list(x.shape) for x in inputs]}")
    if sorted(int(d) for d in dimensions or range(len(shape))) != list(range(len(shape))):
        raise ExecutionError(f"Map dimensions {list(dimensions)} must be all dims 0..{len(shape) - 1}")
    declared = ctx.node.outputs[0].type
    dtype = result_dtype(ctx) if isinstance(declared, TensorType) and declared.dtype else None
    if all(node.op in _VECTORIZABLE for node in computation.nodes):
        (result,) = ctx.run_graph(computation, list(inputs))
        result = np.broadcast_to(result, shape)
        return result.astype(dtype or result.dtype)
    values = [
        np.asarray(ctx.run_graph(computation, [np.asarray(x[index]) for x in inputs])[0]).reshape(())
        for index in np.ndindex(*shape)
    ]
    if not values:
        return np.empty(shape, dtype=dtype or inputs[0].dtype)
    return np.array(values).reshape(shape).astype(dtype or values[0].dtype)


@hlo_op("CustomCall")
def custom_call(ctx, *args, call_target_name=None, backend_config=None, has_side_effect=False):
    raise ExecutionError(
        f"CustomCall target {call_target_name!r} is backend-defined; opconv's reference "
        f"executor has no implementation of it"
    )

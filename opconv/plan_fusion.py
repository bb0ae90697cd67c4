"""Plan rewrites shared by the reference executors' sessions (see opconv.executor): which step computes
each value and who reads it, and an element-wise activation run by the step computing its only input.

A Relu (or the like) that alone reads the fresh output of a convolution or an addition is applied by that
step, in place, while the output is still in cache: one step fewer and no second trip through memory.  Each
dialect's session names its producing ops and activations (the ONNX executor adds Clip with constant bounds,
opconv/dialects/onnx/fusion.py; the IR and HLO executors fuse ReLU after Convolution/ConvBias and Add).

Two rewrites of where constant operands live serve the IR and HLO sessions, whose writers store a uniform
fill as one value broadcast: products and convolutions get such weights as arrays of their own (BLAS cannot
read a broadcast view), and HLO's Pow gets an exponent broadcast from a scalar back as that scalar.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .executor import BoundNode
from .ir import Graph, free_inputs


class Uses:
    """Which step computes each value of a plan, and how many nodes read it."""

    def __init__(self, graph: Graph, plan):
        self.readers: dict[int, int] = {}
        for node in graph.nodes:
            for v in free_inputs(node):
                self.readers[id(v)] = self.readers.get(id(v), 0) + 1
        self.outputs = {id(v) for v in graph.outputs}
        self.producer = {id(v): i for i, step in enumerate(plan.steps) for v in step.node.outputs if v is not None}

    def producer_of_sole_use(self, value) -> int | None:
        """The step computing ``value`` when one node alone reads it and it is no graph output, else None."""
        return None if value is None else self.producer_of_sole_use_id(id(value))

    def producer_of_sole_use_id(self, vid: int) -> int | None:
        if self.readers.get(vid) != 1 or vid in self.outputs:
            return None
        return self.producer.get(vid)


def constant_value(vid: int, initializers: dict, plan) -> Any:
    """The value no run can change: folded from constants alone, or an initializer no feed overrides
    (``initializers``: id -> Value of the graph's initializers)."""
    if plan.folded is not None and vid in plan.folded and vid not in plan.volatile:
        return plan.folded[vid]
    if vid in initializers and vid not in plan.overridable:
        return initializers[vid].const.numpy()
    return None


def materialize_broadcast_constants(graph: Graph, plan, ops: tuple[str, ...]) -> int:
    """Give the steps of ``ops`` (matrix products, convolutions) their constant operands that are broadcast
    views (a uniform fill read as one value repeated, as the IR and HLO writers store them) as arrays of their
    own, made once; returns how many.  BLAS cannot read a view whose strides are zero, and numpy's own loop
    over one is 3-4x slower than the product on the array (alexnet's first fully-connected layer: 33 against
    11.6 ms); the ONNX session computes such a fill (ConstantOfShape) into an array when it folds it.  The
    values are the same: only where they live changes."""
    if plan.folded is None:
        return 0
    initializers = {id(v): v for v in graph.initializers.values()}
    made = 0
    for step, ids in zip(plan.steps, plan.inputs):
        if step.node.op not in ops:
            continue
        for vid in ids:
            if vid is None:
                continue
            c = constant_value(vid, initializers, plan)
            if isinstance(c, np.ndarray) and c.ndim and c.size > 1 and 0 in c.strides:
                plan.folded[vid] = np.ascontiguousarray(c)  # read by every later run in place of the view
                made += 1
    return made


def broadcast_uniform_exponents(graph: Graph, plan, pow_op: str) -> int:
    """Hand the steps of ``pow_op`` their constant exponents that hold one value everywhere (HLO broadcasts
    a scalar to the operand's shape) as that value broadcast (a view of one element), when only such steps
    read them; returns how many.  ``kernels.elementwise.power`` then takes small integer powers as products
    (llama_kv's RMSNorm squares: 5.9 ms a call as float32 pow, ~0.2 ms as products)."""
    if plan.folded is None:
        return 0
    initializers = {id(v): v for v in graph.initializers.values()}
    readers: dict[int, set[str]] = {}
    for step, ids in zip(plan.steps, plan.inputs):
        for vid in ids:
            readers.setdefault(vid, set()).add(step.node.op)
    made = 0
    for step, ids in zip(plan.steps, plan.inputs):
        if step.node.op != pow_op or len(ids) != 2 or ids[1] is None or readers[ids[1]] != {pow_op}:
            continue
        c = constant_value(ids[1], initializers, plan)
        if isinstance(c, np.ndarray) and c.size > 1 and any(c.strides):
            first = c[(slice(0, 1),) * c.ndim]
            if np.array_equal(c, np.broadcast_to(first.reshape(()), c.shape)):  # NaN is no one value
                plan.folded[ids[1]] = np.broadcast_to(first.reshape(()), c.shape)
                made += 1
    return made


def pass_through(ctx, x, *_params, **_attrs):
    """The kernel of a step whose work another step does now: it hands its first input on."""
    return x


def fuse_relu_named(graph: Graph, plan, producers: tuple[str, ...], relu: str) -> int:
    """:func:`fuse_activations` of the op named ``relu`` (max(x, 0)) after ``producers``."""
    from .kernels import elementwise

    return fuse_activations(
        graph, plan, producers, lambda step, _ids: elementwise.relu if step.node.op == relu else None
    )


def fuse_activations(
    graph: Graph, plan, producers: tuple[str, ...], activation_of: Callable[[BoundNode, list], Callable | None]
) -> int:
    """Rewrite ``plan`` so that each activation step alone reading the output of a step whose op is one of
    ``producers`` in the activation's domain (a step that hands its input on, such as a BatchNormalization
    folded into its Conv, is looked through) runs inside that step; returns how many were fused.

    ``activation_of(step, input ids)`` is ``activation(y, out=None)`` for an activation step, else None.
    """
    uses = Uses(graph, plan)
    fused = 0
    for j, relu in enumerate(plan.steps):
        activation = activation_of(relu, plan.inputs[j])
        if activation is None:
            continue
        i = uses.producer_of_sole_use(relu.node.inputs[0])
        if i is not None and plan.steps[i].fn is pass_through:  # the value it hands on is its first input
            i = uses.producer_of_sole_use_id(plan.inputs[i][0]) if plan.inputs[i] else None
        if i is None or plan.foldable[i]:
            continue  # a folded step runs once; its kept value must stay what the node computes
        step = plan.steps[i]
        if (
            step.node.op not in producers
            or step.node.domain != relu.node.domain
            or len(step.node.outputs) != 1
            or isinstance(step.fn, ThenActivation)
        ):
            continue
        plan.steps[i] = BoundNode(
            step.node, ThenActivation(step.fn, activation), step.attrs, step.label + " with " + relu.label
        )
        plan.steps[j] = BoundNode(relu.node, pass_through, {}, relu.label)
        plan.inputs[j] = plan.inputs[j][:1]  # e.g. a Clip's bounds are in the activation now
        plan.donors[j] = tuple(d for d in plan.donors[j] if d == 0)
        fused += 1
    plan.changed()
    return fused


class ThenActivation:
    """A kernel followed by the activation that alone reads its output, which overwrites that output when it
    is fresh."""

    def __init__(self, kernel, activation):
        self.kernel = kernel
        self.activation = activation

    def __call__(self, ctx, *inputs, **attrs):
        y = self.kernel(ctx, *inputs, **attrs)
        if (
            isinstance(y, np.ndarray)
            and y.flags.writeable
            and not any(
                isinstance(a, np.ndarray) and not ctx.owns(i) and np.may_share_memory(y, a)
                for i, a in enumerate(inputs)
            )
        ):
            return self.activation(y, out=y)
        return self.activation(y)  # e.g. a one-input Sum hands back its input

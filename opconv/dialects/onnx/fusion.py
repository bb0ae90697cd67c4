"""Session-time fusion of the ONNX executor: inference BatchNormalization folded into the Conv before it,
and Relu applied by the step that computes its input.

``y = BN(Conv(x, W, B))`` with per-channel ``a = scale / sqrt(var + eps)`` is
``Conv(x, W * a, (B - mean) * a + bias)``: the normalization costs nothing at
run time, where unfused it is two more passes over every activation of a CNN.
The folded weights differ from the two-step result by rounding only (they are
computed in float64).  The model itself is not changed; the session's plan is.

When every parameter is a constant no run can change, the weights are folded
once, here, and the unfused weights the session folded are let go (when
nothing else reads them), so the session holds one copy.  Otherwise the
parameters are read from each run's own values, and the folded weights are
cached for as long as those arrays are the same objects, so a run that feeds
an initializer the weights depend on (models before IR version 4 list every
initializer as an input) gets weights folded from what it fed.  Folded
weights are packed with their bias (``kernels.conv.pack_conv_weights``), so
that the convolution's matrix product adds the bias.

A Relu, or a Clip with constant bounds (MobileNet's ReLU6), that alone reads
the output of a Conv (BatchNormalization folded in or not), Add or Sum is
applied by that step to its fresh output, in place, while the output is still
in cache: one step fewer and no second trip through memory.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...executor import BoundNode
from ...ir import Graph, _free_inputs
from ...kernels import conv as conv_kernels
from ...kernels import elementwise

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class _Uses:
    """Which step computes each value of a plan, and how many nodes read it."""

    def __init__(self, graph: Graph, plan):
        self.readers: dict[int, int] = {}
        for node in graph.nodes:
            for v in _free_inputs(node):
                self.readers[id(v)] = self.readers.get(id(v), 0) + 1
        self.outputs = {id(v) for v in graph.outputs}
        self.producer = {id(v): i for i, step in enumerate(plan.steps) for v in step.node.outputs if v is not None}

    def producer_of_sole_use(self, value) -> int | None:
        """The step computing ``value`` when one node alone reads it and it is no graph output, else None."""
        if value is None or self.readers.get(id(value)) != 1 or id(value) in self.outputs:
            return None
        return self.producer.get(id(value))


def _is_onnx(node, op: str) -> bool:
    return node.op == op and node.domain in ("", "ai.onnx")


def fuse_conv_batch_norm(graph: Graph, plan) -> int:
    """Rewrite ``plan`` (the interpreter's plan of ``graph``) so each Conv -> BatchNormalization pair runs as one
    convolution; returns how many pairs were fused."""
    uses = _Uses(graph, plan)
    uses_by_id, producer_step = uses.readers, uses.producer
    initializers = {id(v): v for v in graph.initializers.values()}
    fused = 0
    for j, bn in enumerate(plan.steps):
        node = bn.node
        if not _is_onnx(node, "BatchNormalization") or not _is_inference(bn):
            continue
        i = uses.producer_of_sole_use(node.inputs[0])
        if i is None or len(node.inputs) != 5 or None in node.inputs:
            continue
        conv = plan.steps[i]
        if not _is_onnx(conv.node, "Conv") or len(conv.node.outputs) != 1:
            continue
        if any(producer_step.get(id(v), -1) >= i for v in node.inputs[1:]):
            continue  # a parameter computed after the Conv (or recomputed when a run overrides it) is not there yet
        fused_conv = _FusedConv(conv.fn, bn.attrs.get("epsilon", 1e-5), conv.attrs.get("group", 1))
        conv_inputs = list(plan.inputs[i]) + [None] * (3 - len(plan.inputs[i]))
        param_ids = conv_inputs[1:3] + plan.inputs[j][1:]
        constants = [None if vid is None else _constant(vid, initializers, plan) for vid in param_ids]
        if all(c is not None or vid is None for c, vid in zip(constants, param_ids)):
            fused_conv.fold_now(*constants)
            plan.inputs[i] = conv_inputs[:1] + [None] * len(param_ids)
            plan.inputs[j] = plan.inputs[j][:1] + [None] * (len(plan.inputs[j]) - 1)
            for vid in param_ids:  # folded values only this pair read: the folded weights replace them
                if vid is not None and uses_by_id.get(vid) == 1 and vid in plan.folded:
                    del plan.folded[vid]
        else:
            plan.inputs[i] = conv_inputs[:1] + param_ids
            current = [None if vid is None else _current(vid, initializers, plan) for vid in param_ids]
            if all(c is not None or vid is None for c, vid in zip(current, param_ids)):
                fused_conv.prime(*current)  # folded now rather than in the first run; a feed refolds
        plan.steps[i] = BoundNode(conv.node, fused_conv, conv.attrs, conv.label + " with " + bn.label)
        plan.donors[i] = tuple(d for d in plan.donors[i] if d == 0)
        plan.steps[j] = BoundNode(node, _pass_through, {}, bn.label)
        fused += 1
    plan.changed()
    return fused


#: ops whose step may apply a following Relu to its own fresh output
_RELU_PRODUCERS = ("Conv", "Add", "Sum")


def fuse_relu(graph: Graph, plan) -> int:
    """Rewrite ``plan`` so that each Relu (or Clip with constant bounds) alone reading a Conv, Add or Sum
    output runs inside that step; returns how many were fused.  A Conv whose BatchNormalization was folded
    in counts as the Conv."""
    uses = _Uses(graph, plan)
    initializers = {id(v): v for v in graph.initializers.values()}
    fused = 0
    for j, relu in enumerate(plan.steps):
        activation = _in_place_activation(relu, plan.inputs[j], initializers, plan)
        if activation is None:
            continue
        i = uses.producer_of_sole_use(relu.node.inputs[0])
        if i is not None and plan.steps[i].fn is _pass_through:  # a BatchNormalization folded into its Conv
            i = uses.producer_of_sole_use(plan.steps[i].node.inputs[0])
        if i is None or plan.foldable[i]:
            continue  # a folded step runs once; its kept value must stay what the node computes
        step = plan.steps[i]
        if not any(_is_onnx(step.node, op) for op in _RELU_PRODUCERS) or len(step.node.outputs) != 1:
            continue
        plan.steps[i] = BoundNode(step.node, _ThenActivation(step.fn, activation), step.attrs,
                                  step.label + " with " + relu.label)
        plan.steps[j] = BoundNode(relu.node, _pass_through, {}, relu.label)
        plan.inputs[j] = plan.inputs[j][:1]  # a Clip's bounds are in the activation now
        plan.donors[j] = tuple(d for d in plan.donors[j] if d == 0)
        fused += 1
    plan.changed()
    return fused


def _in_place_activation(step: BoundNode, input_ids: list, initializers: dict, plan):
    """``activation(y, out)`` for a Relu step, or a Clip step whose bounds no run can change; else None."""
    node = step.node
    if _is_onnx(node, "Relu"):
        return elementwise.relu
    if not _is_onnx(node, "Clip") or (node.version or 0) < 11:
        return None  # Clip-1/6 bounds are attributes of a float type; rare enough to leave unfused
    bounds = [None if vid is None else _constant(vid, initializers, plan) for vid in input_ids[1:3]]
    if any(b is None and vid is not None for b, vid in zip(bounds, input_ids[1:3])):
        return None
    bounds += [None] * (2 - len(bounds))
    return functools.partial(_clip_into, low=bounds[0], high=bounds[1])


def _clip_into(y, out=None, *, low, high):
    return elementwise.clip(y, low, high, out=out)


class _ThenActivation:
    """A kernel followed by the activation that alone reads its output, which overwrites that output when it
    is fresh."""

    def __init__(self, kernel, activation):
        self.kernel = kernel
        self.activation = activation

    def __call__(self, ctx, *inputs, **attrs):
        y = self.kernel(ctx, *inputs, **attrs)
        if isinstance(y, np.ndarray) and y.flags.writeable and not any(
                isinstance(a, np.ndarray) and not ctx.owns(i) and np.may_share_memory(y, a)
                for i, a in enumerate(inputs)):
            return self.activation(y, out=y)
        return self.activation(y)  # e.g. a one-input Sum hands back its input


def _constant(vid: int, initializers: dict, plan) -> Any:
    """The value no run can change: folded from constants alone, or an initializer no feed overrides."""
    if plan.folded is not None and vid in plan.folded and vid not in plan.volatile:
        return plan.folded[vid]
    if vid in initializers and vid not in plan.overridable:
        return initializers[vid].const.numpy()
    return None


def _current(vid: int, initializers: dict, plan) -> Any:
    """The array a run that feeds nothing will pass for this value (folded or initializer), if known now."""
    if plan.folded is not None and vid in plan.folded:
        return plan.folded[vid]
    return initializers[vid].const.numpy() if vid in initializers else None


def _is_inference(step: BoundNode) -> bool:
    """Whether this BatchNormalization node normalizes with its given statistics (see ops/normalization.py)."""
    node, attrs = step.node, step.attrs
    if any(v is not None for v in node.outputs[1:]):
        return False  # statistics outputs: training (or at least not a plain inference node)
    if attrs.get("training_mode"):
        return False
    return attrs.get("spatial", 1) == 1  # spatial=0 normalizes per activation, not per channel


def _pass_through(ctx, x, *_params, **_attrs):
    return x


class _FusedConv:
    """A Conv kernel applying the following BatchNormalization through its weights and bias."""

    def __init__(self, conv, epsilon: float, groups: int):
        self.conv = conv
        self.epsilon = epsilon
        self.groups = groups
        self._sources: tuple | None = ()  # None: folded once from constants (fold_now)
        self._folded: tuple[Any, Any] = (None, None)
        self._unfused: tuple = ()

    def fold_now(self, w, b, scale, bias, mean, var) -> None:
        """Fold constant parameters once; runs then pass none (see fuse_conv_batch_norm)."""
        self._folded = self._fold(w, b, scale, bias, mean, var)
        if self._folded[0] is None:  # not foldable: keep what the two steps need
            self._unfused = (w, b, scale, bias, mean, var)
        self._sources = None

    def prime(self, w, b, scale, bias, mean, var) -> None:
        """Fold from the arrays runs will pass unless a feed replaces one of them."""
        self._refold_if_changed(w, b, scale, bias, mean, var)

    def __call__(self, ctx, x, w=None, b=None, scale=None, bias=None, mean=None, var=None, **attrs):
        if self._sources is None:  # folded once from constants
            if self._folded[0] is None:
                w, b, scale, bias, mean, var = self._unfused
            else:
                return self.conv(ctx, x, *self._folded, **attrs)
        else:
            self._refold_if_changed(w, b, scale, bias, mean, var)
        w_folded, b_folded = self._folded
        if w_folded is None:  # types the fold does not cover: the two steps, as unfused
            from ...kernels import norm

            y = self.conv(ctx, x, w, b, **attrs)
            return norm.batch_norm(y, scale, bias, mean, var, self.epsilon, overwrite_input=True)
        return self.conv(ctx, x, w_folded, b_folded, **attrs)

    def _refold_if_changed(self, w, b, scale, bias, mean, var) -> None:
        sources = (w, b, scale, bias, mean, var)
        if len(sources) != len(self._sources) or any(s is not t for s, t in zip(sources, self._sources)):
            self._folded = self._fold(*sources)
            self._sources = sources

    def _fold(self, w, b, scale, bias, mean, var):
        arrays = [np.asarray(t) for t in (w, scale, bias, mean, var)] + ([] if b is None else [np.asarray(b)])
        if any(a.dtype not in _FLOATS for a in arrays) or len({a.dtype for a in arrays}) != 1:
            return None, None
        w = np.asarray(w)
        channels = w.shape[0]
        if any(np.asarray(t).shape != (channels,) for t in (scale, bias, mean, var)) or (
                b is not None and np.asarray(b).shape != (channels,)):
            return None, None
        a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + np.float64(np.float32(self.epsilon)))
        shift = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
        if b is not None:
            shift = shift + np.asarray(b, np.float64) * a
        w_folded = (w.astype(np.float64) * a.reshape((channels,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        packed = conv_kernels.pack_conv_weights(w_folded, shift.astype(w.dtype), self.groups)
        return (w_folded, shift.astype(w.dtype)) if packed is None else (packed, None)

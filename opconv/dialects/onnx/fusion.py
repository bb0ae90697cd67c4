"""Session-time fusion of the ONNX executor: inference BatchNormalization folded into the Conv before it.

``y = BN(Conv(x, W, B))`` with per-channel ``a = scale / sqrt(var + eps)`` is
``Conv(x, W * a, (B - mean) * a + bias)``: the normalization costs nothing at
run time, where unfused it is two more passes over every activation of a CNN.
The folded weights differ from the two-step result by rounding only (they are
computed in float64).  The model itself is not changed; the session's plan is.

The parameters are read from the run's own values, and the folded weights are
cached for as long as those arrays are the same objects, so a run that feeds
an initializer the weights depend on (models before IR version 4 list every
initializer as an input) gets weights folded from what it fed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...executor import BoundNode
from ...ir import Graph, _free_inputs

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fuse_conv_batch_norm(graph: Graph, plan) -> int:
    """Rewrite ``plan`` (the interpreter's plan of ``graph``) so each Conv -> BatchNormalization pair runs as one
    convolution; returns how many pairs were fused."""
    uses: dict[int, int] = {}
    for node in graph.nodes:
        for v in _free_inputs(node):
            uses[id(v)] = uses.get(id(v), 0) + 1
    outputs = {id(v) for v in graph.outputs}
    producer_step = {id(v): i for i, step in enumerate(plan.steps) for v in step.node.outputs if v is not None}
    fused = 0
    for j, bn in enumerate(plan.steps):
        node = bn.node
        if node.op != "BatchNormalization" or node.domain not in ("", "ai.onnx") or not _is_inference(bn):
            continue
        x = node.inputs[0]
        i = producer_step.get(id(x))
        if i is None or uses.get(id(x)) != 1 or id(x) in outputs or len(node.inputs) != 5 or None in node.inputs:
            continue
        conv = plan.steps[i]
        if conv.node.op != "Conv" or conv.node.domain not in ("", "ai.onnx") or len(conv.node.outputs) != 1:
            continue
        if any(producer_step.get(id(v), -1) >= i for v in node.inputs[1:]):
            continue  # a parameter computed after the Conv (or recomputed when a run overrides it) is not there yet
        plan.steps[i] = BoundNode(conv.node, _FusedConv(conv.fn, bn.attrs.get("epsilon", 1e-5)), conv.attrs,
                                  conv.label + " with " + bn.label)
        conv_inputs = list(plan.inputs[i]) + [None] * (3 - len(plan.inputs[i]))
        plan.inputs[i] = conv_inputs[:3] + plan.inputs[j][1:]
        plan.donors[i] = tuple(d for d in plan.donors[i] if d == 0)
        plan.steps[j] = BoundNode(node, _pass_through, {}, bn.label)
        fused += 1
    return fused


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

    def __init__(self, conv, epsilon: float):
        self.conv = conv
        self.epsilon = epsilon
        self._sources: tuple = ()
        self._folded: tuple[Any, Any] = (None, None)

    def __call__(self, ctx, x, w, b, scale, bias, mean, var, **attrs):
        sources = (w, b, scale, bias, mean, var)
        if len(sources) != len(self._sources) or any(s is not t for s, t in zip(sources, self._sources)):
            self._folded = self._fold(*sources)
            self._sources = sources
        w_folded, b_folded = self._folded
        if w_folded is None:  # types the fold does not cover: the two steps, as unfused
            from ...kernels import norm

            y = self.conv(ctx, x, w, b, **attrs)
            return norm.batch_norm(y, scale, bias, mean, var, self.epsilon, overwrite_input=True)
        return self.conv(ctx, x, w_folded, b_folded, **attrs)

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
        return w_folded, shift.astype(w.dtype)
